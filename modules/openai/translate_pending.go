package openai

import (
	"errors"
	"io"
	"net/http"
)

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

// ServeStoredResponse answers GET and DELETE /v1/responses/{id}.
func ServeStoredResponse(w http.ResponseWriter, r *http.Request, id string) {
	(&Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
		Message: "no stored response " + id}).Write(w)
}

// ChatToMessagesBody translates a chat request for an engine that speaks
// only Messages.
func ChatToMessagesBody(chat []byte, model string) ([]byte, error) {
	return nil, errors.New("translating to Messages is not served yet")
}

// MessagesToChatBody translates a whole Messages answer to chat.
func MessagesToChatBody(b []byte) ([]byte, error) {
	return nil, errors.New("translating from Messages is not served yet")
}

// MessagesToChatStream translates a Messages stream to chat.
func MessagesToChatStream(rc io.ReadCloser) io.ReadCloser { return rc }

// MessagesErrorToOpenAI translates a Messages error body.
func MessagesErrorToOpenAI(status int, b []byte) []byte { return b }
