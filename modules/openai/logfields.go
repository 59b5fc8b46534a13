package openai

import (
	"net/http"
	"strconv"
	"time"

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

	// The request log's fields (see Tracked), set on every request the
	// log follows.
	RequestID string
	// Tenant is the key's project path (org/team/project).
	Tenant string
	// Asked is the model as the request named it.
	Asked string
	// ReplicaNode is the node of a replica on another node ("" for this
	// node's).
	ReplicaNode string
	// Route says how the model that served was reached when not as
	// asked: "fallback" or "canary".
	Route string
	// Provider is, for a model with providers, the one that served, and
	// ProviderReason why it was chosen (cheapest, spill_full, …).
	Provider, ProviderReason string
	// ErrCode is the error's code when the answer is an error.
	ErrCode      string
	CachedTokens int64
	// CostMicros is the answer's cost in millionths of the catalog's
	// currency; HasCost says the model has a price.
	CostMicros int64
	HasCost    bool
	Stream     bool
	// Status is the answer's HTTP status (0 until one is written).
	Status int
	// Start is when the first llm handler saw the request, First when
	// the answer's first byte was written, End when the last handler
	// returned.
	Start, First, End time.Time
	// ReqBody and RespBody are the bodies the request log keeps for a
	// tenant that asked for them (the request as forwarded, after
	// redaction; the answer as the engine gave it), each bounded.
	ReqBody, RespBody []byte
	// KeepBodies says the request's tenant keeps bodies in the log.
	KeepBodies bool
}

const logVar = "llm.log"

// Log returns the request's log fields, adding them to its access log on
// first use. Without an access log it returns a value that goes nowhere.
func Log(r *http.Request) *LogFields {
	if f, ok := caddyhttp.GetVar(r.Context(), logVar).(*LogFields); ok {
		return f
	}
	f := new(LogFields)
	addLogFields(r, f)
	return f
}

// addLogFields makes f the request's log fields.
func addLogFields(r *http.Request, f *LogFields) {
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Add(zap.Inline(f))
	}
	caddyhttp.SetVar(r.Context(), logVar, f)
}

// MaxLoggedBody bounds each body the request log keeps; one byte more is
// kept, to tell that a body was cut.
const MaxLoggedBody = 64 << 10

// KeepRequest keeps the request's body as forwarded, when the request's
// tenant keeps bodies.
func (f *LogFields) KeepRequest(b []byte) {
	if f.KeepBodies {
		f.ReqBody = append(f.ReqBody[:0], b[:min(len(b), MaxLoggedBody+1)]...)
	}
}

// KeepResponse adds b to the answer's body kept, when the request's
// tenant keeps bodies, up to the bound.
func (f *LogFields) KeepResponse(b []byte) {
	if f.KeepBodies && len(f.RespBody) <= MaxLoggedBody {
		f.RespBody = append(f.RespBody, b[:min(len(b), MaxLoggedBody+1-len(f.RespBody))]...)
	}
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
	f.marshalRequestLog(enc)
	return nil
}

// marshalRequestLog writes the fields the request log follows: the
// request id, the route taken, the cost and the time to first byte.
func (f *LogFields) marshalRequestLog(enc zapcore.ObjectEncoder) {
	if f.RequestID != "" {
		enc.AddString("llm_request_id", f.RequestID)
	}
	if f.Route != "" {
		enc.AddString("llm_route", f.Route)
	}
	if f.Provider != "" {
		enc.AddString("llm_provider", f.Provider)
		enc.AddString("llm_provider_reason", f.ProviderReason)
	}
	if f.Route != "" && f.Asked != "" {
		enc.AddString("llm_asked", f.Asked)
	}
	if f.HasCost {
		enc.AddString("llm_cost", strconv.FormatFloat(float64(f.CostMicros)/1e6, 'f', -1, 64))
	}
	if !f.First.IsZero() && !f.Start.IsZero() {
		enc.AddFloat64("llm_ttft_ms", float64(f.First.Sub(f.Start).Microseconds())/1000)
	}
}
