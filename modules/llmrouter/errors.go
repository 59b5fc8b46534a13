package llmrouter

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
)

// toAPIError maps an error on the request path to its status and
// OpenAI-shaped body. It is the one place that decides statuses.
func toAPIError(err error) *openai.Error {
	var (
		oe  *openai.Error
		um  *catalog.UnknownModelError
		nc  *fleet.NoCapacityError
		ue  *upstreamError
		msg = "the gateway could not serve the request"
	)
	if err != nil {
		msg = err.Error()
	}
	switch {
	case errors.As(err, &oe):
		return oe
	case errors.As(err, &um):
		return &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found",
			Param: "model", Message: msg}
	case errors.As(err, &nc):
		return &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "no_capacity",
			Message: msg, RetryAfter: max(nc.RetryAfter, 1)}
	case errors.Is(err, errFirstByteTimeout):
		return &openai.Error{Status: http.StatusGatewayTimeout, Type: "server_error", Code: "upstream_timeout",
			Message: "the model did not answer in time (first_byte_timeout); try again or ask for a shorter answer"}
	case errors.Is(err, context.Canceled):
		return &openai.Error{Status: 499, Type: "invalid_request_error", Code: "client_closed",
			Message: "the client closed the request"}
	case errors.As(err, &ue):
		return &openai.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_unreachable",
			Message: "could not reach the model's replica: " + msg}
	}
	return &openai.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_error", Message: msg}
}

// writeError answers with err, and with the router's time so far in
// Server-Timing when start is known.
func (rt *Router) writeError(w http.ResponseWriter, r *http.Request, err error, start time.Time) {
	e := toAPIError(err)
	if model, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		if name, _ := model.GetString("http.llm.model"); name != "" {
			countRequest(name, rt.engineOf(name), openai.Log(r).API, e.Status)
		}
	}
	if !start.IsZero() {
		w.Header().Add("Server-Timing", serverTiming(time.Since(start), -1))
	}
	if c := rt.logger.Check(zapcore.DebugLevel, "request failed"); c != nil {
		c.Write(zap.Int("status", e.Status), zap.String("code", e.Code), zap.String("error", e.Message))
	}
	if e.Status == 499 && r.Context().Err() != nil {
		return // nobody to answer
	}
	e.Write(w)
}
