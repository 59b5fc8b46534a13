package openai

import "net/http"

// Placeholders until the translations land: both APIs answer 501.

var defaultStore ResponseStore

func parseResponses(_ *http.Request, _ []byte) (*Request, error) {
	return nil, &Error{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "not_implemented",
		Message: "the Responses API is not served yet"}
}

func parseMessages(_ *http.Request, _ []byte, _ bool) (*Request, error) {
	return nil, &Error{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "not_implemented",
		Message: "the Messages API is not served yet"}
}

func newMessagesErrorWriter(w http.ResponseWriter) http.ResponseWriter { return w }
