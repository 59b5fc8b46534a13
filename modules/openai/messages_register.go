package openai

import "net/http"

func init() { RegisterAPI(APIMessages, messagesAPI{}) }

// messagesAPI is Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens) translated to chat completions.
type messagesAPI struct{}

func (messagesAPI) Parse(r *http.Request, endpoint string, body []byte) (*Request, error) {
	return parseMessages(r, body, endpoint == CountTokens)
}

func (messagesAPI) ErrorWriter(w http.ResponseWriter) http.ResponseWriter {
	return newMessagesErrorWriter(w)
}
