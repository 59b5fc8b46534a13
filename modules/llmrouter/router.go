// Package llmrouter is the llm_router HTTP handler: it serves the OpenAI
// API, maps a request's model to a replica of the llm app's catalog and
// proxies the bytes to it.
package llmrouter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
	"github.com/llmgw/llmgw/modules/openai/responsesapi"
)

func init() {
	caddy.RegisterModule(Router{})
}

// Router serves the OpenAI API under /v1/ in front of the llm app's
// models: GET /v1/models, POST /v1/chat/completions, /v1/completions and
// /v1/embeddings, streamed (SSE) or not; OpenAI's Responses API (POST
// /v1/responses, GET and DELETE /v1/responses/{id}) and Anthropic's
// Messages API (POST /v1/messages, /v1/messages/count_tokens), translated
// to and from chat completions unless the replica's engine speaks them.
//
// The model field picks a catalog model (by name or alias); its replica is
// chosen by the policy (default least_outstanding). When a model fails
// before the first byte of its answer (connect error, 5xx, 429, no ready
// replica), its fallbacks are tried in order; a model served by several
// providers also goes on to the next provider when one sends nothing
// within first_byte_timeout. Errors are OpenAI-shaped:
// 400 invalid request, 404 unknown model (with close names), 502 replica
// unreachable, 503 no ready replica (with Retry-After), 504 no first byte
// within first_byte_timeout. After the first streamed byte an error is an
// SSE error event and the stream ends.
//
// Every response carries Server-Timing with the router's own time
// (llm_route) and the upstream's time to first byte (llm_upstream).
//
// Placeholders set: {http.llm.model} (catalog name), {http.llm.replica},
// {http.llm.usage.prompt_tokens}, {http.llm.usage.completion_tokens},
// {http.llm.usage.total_tokens}. The same values are added to the access
// log as llm_model, llm_replica, llm_prompt_tokens, llm_completion_tokens.
// With expose_replica, answers carry X-Llmgw-Replica and X-Llmgw-Node.
type Router struct {
	// PolicyRaw chooses among a model's ready replicas.
	// Default: least_outstanding.
	PolicyRaw json.RawMessage `json:"policy,omitempty" caddy:"namespace=http.llm_router.policies inline_key=policy"`
	// FirstByteTimeout bounds the wait for an upstream's response headers
	// (for non-streamed answers, the whole generation); when it passes the
	// client gets a 504 and no fallback is tried. A model served by
	// several providers instead goes on to its next provider, once per
	// request: each try waits the whole timeout, so a client waits at most
	// twice this for headers. Default: 5m.
	FirstByteTimeout caddy.Duration `json:"first_byte_timeout,omitempty"`
	// DialTimeout bounds connecting to a replica. Default: 5s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// MaxIdleConnsPerHost is the keep-alive pool per replica; size it to
	// the concurrency a replica sees. Default: 512.
	MaxIdleConnsPerHost int `json:"max_idle_conns_per_host,omitempty"`
	// MaxN is the most choices (n) a request may ask for; more is a 400.
	// Each choice is a generation, so n multiplies an engine's work. At
	// most 128. Default: 16.
	MaxN int `json:"max_n,omitempty"`
	// MaxMessages is the most messages a chat request may carry; more is
	// a 400. Default: 2048.
	MaxMessages int `json:"max_messages,omitempty"`
	// ExposeReplica adds to every answer a replica served the headers
	// X-Llmgw-Replica (the replica's id) and X-Llmgw-Node (the node it
	// runs on: in a cluster its node's name, else this host's), for
	// tracing which replica and node answered. Off by default: they tell
	// clients about the deployment. Default: false.
	ExposeReplica bool `json:"expose_replica,omitempty"`

	policy    fleet.Selector
	provs     *sync.Map // *catalog.Model → *providerSet (providers.go)
	app       *llm.App
	transport *http.Transport
	tkey      string
	logger    *zap.Logger
	unadmin   func() // lets go of the admin routes (admin.go)
}

// CaddyModule returns the Caddy module information.
func (Router) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_router",
		New: func() caddy.Module { return new(Router) },
	}
}

// Provision sets defaults and connects to the llm app.
func (rt *Router) Provision(ctx caddy.Context) error {
	rt.logger = ctx.Logger()
	if rt.FirstByteTimeout == 0 {
		rt.FirstByteTimeout = caddy.Duration(5 * time.Minute)
	}
	if rt.DialTimeout == 0 {
		rt.DialTimeout = caddy.Duration(5 * time.Second)
	}
	if rt.MaxIdleConnsPerHost == 0 {
		rt.MaxIdleConnsPerHost = 512
	}
	rt.provisionLimits()
	rt.provs = new(sync.Map)
	openai.ApplyServerDefaults(ctx, rt.logger)
	if rt.PolicyRaw != nil {
		mod, err := ctx.LoadModule(rt, "PolicyRaw")
		if err != nil {
			return fmt.Errorf("loading llm_router policy: %w", err)
		}
		rt.policy = mod.(fleet.Selector)
	} else {
		rt.policy = LeastOutstanding{}
	}
	appIface, err := ctx.App("llm")
	if err != nil {
		return err // the llm app's own error: Caddy makes one if none is configured
	}
	rt.app = appIface.(*llm.App)
	rt.tkey = fmt.Sprintf("transport:%d:%d", rt.DialTimeout, rt.MaxIdleConnsPerHost)
	v, _, err := transports.LoadOrNew(rt.tkey, func() (caddy.Destructor, error) {
		return &pooledTransport{cluster.EngineTransport(time.Duration(rt.DialTimeout), rt.MaxIdleConnsPerHost)}, nil
	})
	if err != nil {
		return err
	}
	rt.transport = v.(*pooledTransport).Transport
	if err := registerMetrics(ctx.GetMetricsRegistry(), rt.app); err != nil {
		return err
	}
	initModelMetrics(rt.app)
	rt.unadmin = rt.app.RegisterAdmin("providers", providersAdmin{rt})
	return nil
}

// engineOf names a catalog model's engine, for metrics.
func (rt *Router) engineOf(model string) string {
	if m, err := rt.app.Lookup(model); err == nil {
		return m.Engine
	}
	return ""
}

// Validate checks the configuration.
func (rt *Router) Validate() error {
	if rt.FirstByteTimeout < 0 || rt.DialTimeout < 0 || rt.MaxIdleConnsPerHost < 0 {
		return fmt.Errorf("llm_router: timeouts and pool sizes must not be negative")
	}
	return rt.validateLimits()
}

// Cleanup lets go of the admin routes and the shared transport.
func (rt *Router) Cleanup() error {
	if rt.unadmin != nil {
		rt.unadmin()
	}
	if rt.tkey != "" {
		_, _ = transports.Delete(rt.tkey)
	}
	return nil
}

// ServeHTTP serves the OpenAI API. It ends the chain for /v1/ paths it
// knows and answers others with an OpenAI-shaped 404.
func (rt *Router) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	w, tracked := openai.Track(w, r)
	if tracked != nil {
		defer rt.app.RecordRequest(tracked)
	}
	start := time.Now()
	path := r.URL.Path
	i := strings.Index(path, "/v1/")
	if i < 0 {
		notFound(w, r, path)
		return nil
	}
	endpoint := path[i+len("/v1/"):]
	switch endpoint {
	case openai.ChatCompletions, openai.Completions, openai.Embeddings, openai.Responses, openai.Messages, openai.CountTokens:
		if r.Method != http.MethodPost {
			methodNotAllowed(w, r, "POST")
			return nil
		}
		rt.serveGenerate(w, r, start)
	case "models":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, r, "GET")
			return nil
		}
		rt.serveModels(w, r)
	default:
		if id, ok := strings.CutPrefix(endpoint, "models/"); ok && r.Method == http.MethodGet {
			rt.serveModel(w, r, id)
			return nil
		}
		if id, ok := strings.CutPrefix(endpoint, "responses/"); ok {
			if r.Method != http.MethodGet && r.Method != http.MethodDelete {
				methodNotAllowed(w, r, "GET, DELETE")
				return nil
			}
			responsesapi.ServeStoredResponse(w, r, id)
			return nil
		}
		notFound(w, r, path)
	}
	return nil
}

func notFound(w http.ResponseWriter, r *http.Request, path string) {
	if strings.Contains(path, "/v1/images/") || strings.Contains(path, "/v1/jobs") {
		(&openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("%s is served by llm_jobs, which this site does not run: put llm_jobs before llm_router in its route (docs/jobs.md)", path)}).WriteFor(w, r)
		return
	}
	(&openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
		Message: fmt.Sprintf("unknown endpoint %s; this gateway serves /v1/models, /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/responses, /v1/messages and /v1/messages/count_tokens", path)}).WriteFor(w, r)
}

func methodNotAllowed(w http.ResponseWriter, r *http.Request, allowed string) {
	w.Header().Set("Allow", allowed)
	(&openai.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
		Message: "this endpoint accepts " + allowed + " only"}).WriteFor(w, r)
}

var transports = caddy.NewUsagePool()

type pooledTransport struct{ *http.Transport }

func (p *pooledTransport) Destruct() error {
	p.CloseIdleConnections()
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Router)(nil)
	_ caddy.Validator             = (*Router)(nil)
	_ caddy.CleanerUpper          = (*Router)(nil)
	_ caddyhttp.MiddlewareHandler = (*Router)(nil)
)
