package openai

import "net/http"

// Placeholders until the translations land: both APIs answer 501.

func parseMessages(_ *http.Request, _ []byte, _ bool) (*Request, error) {
	return nil, &Error{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "not_implemented",
		Message: "the Messages API is not served yet"}
}

func newMessagesErrorWriter(w http.ResponseWriter) http.ResponseWriter { return w }
