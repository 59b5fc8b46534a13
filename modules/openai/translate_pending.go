package openai

import "net/http"

// Placeholders until the translations land: both APIs answer 501.

var defaultStore ResponseStore

func parseResponses(_ *http.Request, _ []byte) (*Request, error) {
	return nil, &Error{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "not_implemented",
		Message: "the Responses API is not served yet"}
}
