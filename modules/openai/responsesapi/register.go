package responsesapi

import (
	"net/http"

	"github.com/llmgw/llmgw/modules/openai"
)

func init() { openai.RegisterAPI(openai.APIResponses, responsesAPI{}) }

// responsesAPI is OpenAI's Responses API (POST /v1/responses) translated
// to chat completions.
type responsesAPI struct{}

func (responsesAPI) Parse(r *http.Request, _ string, body []byte) (*openai.Request, error) {
	return parseResponses(r, body)
}

// ErrorWriter returns w: Responses errors have chat completions' shape.
func (responsesAPI) ErrorWriter(w http.ResponseWriter) http.ResponseWriter { return w }
