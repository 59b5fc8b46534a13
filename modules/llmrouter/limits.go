package llmrouter

import (
	"fmt"
	"net/http"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// Defaults of the router's request limits.
const (
	defaultMaxN        = 16
	defaultMaxMessages = 2048
)

// provisionLimits applies the limits' defaults.
func (rt *Router) provisionLimits() {
	if rt.MaxN == 0 {
		rt.MaxN = defaultMaxN
	}
	if rt.MaxMessages == 0 {
		rt.MaxMessages = defaultMaxMessages
	}
}

func (rt *Router) validateLimits() error {
	if rt.MaxN < 0 || rt.MaxN > openai.MaxN {
		return fmt.Errorf("llm_router: max_n must be from 1 to %d", openai.MaxN)
	}
	if rt.MaxMessages < 0 {
		return fmt.Errorf("llm_router: max_messages must not be negative")
	}
	return nil
}

// checkLimits holds a parsed request to the operator's limits and to the
// model's context length, before anything is sent to an engine. The
// bounds that hold everywhere (types, temperature, stop …) were checked
// when the request was parsed.
func (rt *Router) checkLimits(req *openai.Request, m *catalog.Model) error {
	if req.N > int64(rt.MaxN) {
		return limitError("n", fmt.Sprintf("n is %d, above this gateway's limit of %d choices per request; ask for fewer", req.N, rt.MaxN))
	}
	if req.MessageCount > rt.MaxMessages {
		return limitError("messages", fmt.Sprintf("messages has %d items, above this gateway's limit of %d; shorten the conversation", req.MessageCount, rt.MaxMessages))
	}
	if m.ContextLength > 0 && req.MaxTokens > m.ContextLength {
		param := req.MaxTokensParam
		return limitError(param, fmt.Sprintf("%s is %d, above the context length of model %q (%d tokens); ask for fewer", param, req.MaxTokens, m.Name, m.ContextLength))
	}
	return nil
}

// capOutput holds a request to the smallest max_output of its model, its
// key and the key's levels: one asking for more is refused, naming who
// sets the cap; one asking nothing is sent with the cap as its
// max_tokens. A cap at or above the context length adds nothing to the
// context length's own check.
func capOutput(r *http.Request, req *openai.Request, m *catalog.Model) error {
	if req.Endpoint == openai.Embeddings || req.CountOnly {
		return nil
	}
	t, _ := tenancy.TenantOf(r)
	c := tenancy.CapOf(m, t)
	switch {
	case c.Tokens == 0 || (m.ContextLength > 0 && c.Tokens >= m.ContextLength):
		return nil
	case req.MaxTokens > c.Tokens:
		param := req.MaxTokensParam
		return limitError(param, fmt.Sprintf("%s is %d, over the max_output of %d tokens set for %s; ask for %d or fewer",
			param, req.MaxTokens, c.Tokens, c.Setter(m.Name), c.Tokens))
	case req.MaxTokens == 0:
		return req.CapOutput(c.Tokens)
	}
	return nil
}

func limitError(param, msg string) *openai.Error {
	return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value", Param: param, Message: msg}
}
