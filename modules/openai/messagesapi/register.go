package messagesapi

import (
	"net/http"

	"github.com/llmgw/llmgw/modules/openai"
)

func init() { openai.RegisterAPI(openai.APIMessages, messagesAPI{}) }

// messagesAPI is Anthropic's Messages API (POST /v1/messages and
// /v1/messages/count_tokens) translated to chat completions.
type messagesAPI struct{}

func (messagesAPI) Parse(r *http.Request, endpoint string, body []byte) (*openai.Request, error) {
	return parseMessages(r, body, endpoint == openai.CountTokens)
}

func (messagesAPI) ErrorWriter(w http.ResponseWriter) http.ResponseWriter {
	return newMessagesErrorWriter(w)
}
