package openai

import "net/http"

// Placeholders until the Responses translation lands.

var defaultStore ResponseStore

func parseResponses(_ *http.Request, _ []byte) (*Request, error) {
	return nil, &Error{Status: http.StatusNotImplemented, Type: "invalid_request_error", Code: "not_implemented",
		Message: "the Responses API is not served yet"}
}

// ServeStoredResponse answers GET and DELETE /v1/responses/{id}.
func ServeStoredResponse(w http.ResponseWriter, r *http.Request, id string) {
	(&Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
		Message: "no stored response " + id}).Write(w)
}
