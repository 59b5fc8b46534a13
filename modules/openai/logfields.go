package openai

import (
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// LogFields are a request's llm_* access-log fields. The llm handlers
// fill one shared value, added to Caddy's extra log fields once, inline:
// each extra field Caddy is given costs it a cache reset, and the values
// are read only when the access log is written.
type LogFields struct {
	Key, API, Model, Replica, Engine, Cache, Guard string
	// Tool is an MCP tool call's namespaced tool (server.tool).
	Tool string
	// KB names the knowledge bases a request searched (vs_…,vs_…).
	KB                             string
	PromptTokens, CompletionTokens int64
	HasUsage                       bool
}

const logVar = "llm.log"

// Log returns the request's log fields, adding them to its access log on
// first use. Without an access log it returns a value that goes nowhere.
func Log(r *http.Request) *LogFields {
	if f, ok := caddyhttp.GetVar(r.Context(), logVar).(*LogFields); ok {
		return f
	}
	f := new(LogFields)
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.Inline(f))
	}
	caddyhttp.SetVar(r.Context(), logVar, f)
	return f
}

// MarshalLogObject writes the fields that are set.
func (f *LogFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	for _, s := range [...]struct{ k, v string }{
		{"llm_key", f.Key}, {"llm_api", f.API}, {"llm_model", f.Model}, {"llm_replica", f.Replica}, {"llm_engine", f.Engine},
		{"llm_cache", f.Cache}, {"llm_guard", f.Guard}, {"llm_tool", f.Tool}, {"llm_kb", f.KB},
	} {
		if s.v != "" {
			enc.AddString(s.k, s.v)
		}
	}
	if f.HasUsage {
		enc.AddInt64("llm_prompt_tokens", f.PromptTokens)
		enc.AddInt64("llm_completion_tokens", f.CompletionTokens)
	}
	return nil
}
