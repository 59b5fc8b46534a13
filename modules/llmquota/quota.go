// Package llmquota is the llm_quota HTTP handler: API keys, the tenancy
// tree's limits and usage accounting, exact across gateway instances when
// the counters live in Redis.
package llmquota

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/certmagic"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
	_ "github.com/llmgw/llmgw/modules/openai/messagesapi"  // Enter translates Messages requests
	_ "github.com/llmgw/llmgw/modules/openai/responsesapi" // and Responses requests
)

func init() {
	caddy.RegisterModule(Quota{})
}

var now = time.Now

// Quota authenticates callers by API key and enforces the limits of the
// key's project, team and organisation (the llm app's orgs).
//
// Clients see: 401 for a missing, unknown or revoked key; 403 for a model
// the key may not use; 429 with Retry-After and a message that names the
// limit (code rate_limit_exceeded, or insufficient_quota for a budget);
// 503 when the counter store is unreachable and on_store_error is deny.
// 429s carry x-ratelimit-limit-requests, x-ratelimit-remaining-requests,
// x-ratelimit-reset-requests and the same three for tokens, for the
// tightest level; with RateLimitHeaders "always", every answer does.
//
// Usage (requests, tokens, cost) is recorded per key, project, team and
// organisation and model, and readable at the admin API's /llm/usage.
// The key's id is added to the access log as llm_key; secrets never are.
type Quota struct {
	// Store holds the counters: "memory" (this instance only) or
	// "redis://[user:password@]host:port[/db]" to share exact limits
	// between instances, or, with Sentinel,
	// "redis://[user:password@]sentinel:26379?master_name=mymaster&addr=sentinel2:26379"
	// (the user and password are the Sentinels'). Default: memory.
	Store string `json:"store,omitempty"`
	// OnStoreError says what happens while the store is unreachable:
	// "deny" answers 503; "allow" admits and counts in this instance.
	// After the first failure the store counts as down and the policy
	// applies at once, without trying Redis, until a probe (one a
	// second) finds it again. Default: deny.
	OnStoreError string `json:"on_store_error,omitempty"`
	// DefaultMaxTokens is reserved for the answer when a request sets no
	// max_tokens and neither a max_output (its model's, its key's) nor its
	// model's context length bounds it. Default: 1024.
	DefaultMaxTokens int64 `json:"default_max_tokens,omitempty"`
	// Lease bounds how long a request counts as in flight if its instance
	// dies before settling. Default: 15m.
	Lease caddy.Duration `json:"lease,omitempty"`
	// RateLimitHeaders says which answers carry the x-ratelimit-*
	// headers: "refused" (429s only) or "always" (every answer, as
	// OpenAI sends them, for clients that pace themselves by them).
	// Refused keeps the limits and remaining counts of a key's project,
	// team and organisation from callers that are not over them, and
	// saves six header lines per answer, which cost more CPU than the
	// rest of llm_quota's work. Default: refused.
	RateLimitHeaders string `json:"rate_limit_headers,omitempty"`

	app        *llm.App
	store      store
	fallback   *memoryStore // counts while Redis is down and policy is allow
	poolKeys   []string
	unregister func()
	down       *atomic.Bool
	logger     *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (Quota) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_quota",
		New: func() caddy.Module { return new(Quota) },
	}
}

// Provision connects to the llm app and the counter store.
func (q *Quota) Provision(ctx caddy.Context) error {
	q.logger = ctx.Logger()
	q.down = new(atomic.Bool)
	if q.OnStoreError == "" {
		q.OnStoreError = "deny"
	}
	if q.DefaultMaxTokens == 0 {
		q.DefaultMaxTokens = 1024
	}
	if q.Lease == 0 {
		q.Lease = caddy.Duration(15 * time.Minute)
	}
	a, err := ctx.App("llm")
	if err != nil {
		return err // the llm app's own error: Caddy makes one if none is configured
	}
	q.app = a.(*llm.App)
	var storage certmagic.Storage
	if q.Store == "" || q.Store == "memory" {
		storage = ctx.Storage()
	}
	st, err := q.loadStore(q.Store, storage)
	if err != nil {
		return err
	}
	q.store = st
	if q.OnStoreError == "allow" {
		fb, err := q.loadStore("memory", nil)
		if err != nil {
			return err
		}
		q.fallback = fb.(*memoryStore)
	}
	unreadUsage := q.app.RegisterUsageReader(fmt.Sprintf("llm_quota:%p", q), q.store)
	unregisterCharger := q.registerCharger()
	q.unregister = func() { unreadUsage(); unregisterCharger() }
	return registerMetrics(ctx.GetMetricsRegistry(), newStoreUp(q.Store, q.store))
}

// loadStore returns the pooled store for a URL, so counters survive
// reloads. The primary memory store (not the fallback while Redis is down)
// keeps its usage in storage.
func (q *Quota) loadStore(url string, storage certmagic.Storage) (store, error) {
	primary := storage != nil
	key := "store:" + url
	if url == "" || url == "memory" {
		key = "store:memory"
	}
	v, _, err := stores.LoadOrNew(key, func() (caddy.Destructor, error) {
		if key == "store:memory" {
			m := newMemoryStore()
			if primary { // usage outlives a restart (persist.go)
				if err := m.persistUsage(storage, q.logger); err != nil {
					_ = m.Destruct()
					return nil, err
				}
			}
			return m, nil
		}
		return newRedisStore(url)
	})
	if err != nil {
		return nil, fmt.Errorf("llm_quota store %q: %w", url, err)
	}
	q.poolKeys = append(q.poolKeys, key)
	return v.(store), nil
}

var stores = caddy.NewUsagePool()

// Validate checks the configuration.
func (q *Quota) Validate() error {
	if q.OnStoreError != "deny" && q.OnStoreError != "allow" {
		return fmt.Errorf("llm_quota: on_store_error %q: use deny or allow", q.OnStoreError)
	}
	if q.RateLimitHeaders != "" && q.RateLimitHeaders != "always" && q.RateLimitHeaders != "refused" {
		return fmt.Errorf("llm_quota: rate_limit_headers %q: use always or refused", q.RateLimitHeaders)
	}
	if !q.app.HasTenants() {
		return fmt.Errorf("llm_quota: no keys can pass: declare org { team { project { key … } } } in the llm global option")
	}
	return nil
}

// Cleanup releases the store.
func (q *Quota) Cleanup() error {
	if q.unregister != nil {
		q.unregister()
	}
	for _, k := range q.poolKeys {
		_, _ = stores.Delete(k)
	}
	return nil
}

// ServeHTTP admits the request against every level of its key, calls the
// next handler, and settles the real usage.
func (q *Quota) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	w, tracked := openai.Track(w, r)
	if tracked != nil {
		defer q.app.RecordRequest(tracked)
	}
	tenant, err := q.authenticate(r)
	if err != nil {
		(&openai.Error{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: err.Error()}).WriteFor(w, r)
		return nil
	}
	tenancy.SetTenant(r, tenant)
	lf := openai.Log(r)
	lf.Key, lf.Tenant, lf.KeepBodies = tenant.KeyID, tenantPath(tenant), q.keepsBodies(tenant)
	w, req, err := openai.Enter(w, r)
	if errors.Is(err, openai.ErrNotGenerating) {
		if q.serveMCP(w, r, tenant) {
			return nil
		}
		return next.ServeHTTP(w, r)
	}
	if err != nil {
		return next.ServeHTTP(w, r) // the router answers with the error
	}
	lf.Asked = req.Model
	m, err := q.app.LookupLatest(req.Model) // a model added on another node a moment ago too
	if err != nil {
		return next.ServeHTTP(w, r) // the router answers 404 with close names
	}
	if !tenant.Allowed(req.Model, m.Name) {
		(&openai.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "model_not_allowed", Param: "model",
			Message: fmt.Sprintf("your key (%s) may not use the model %q; GET /v1/models lists the models it may use", tenant.KeyID, req.Model)}).Write(w)
		return nil
	}
	adm := q.plan(tenant, req, m)
	_, span, traced := openai.StartSpan(r.Context(), "llm.quota")
	st, dec, err := q.admit(r, adm)
	if traced {
		span.SetAttributes(attribute.String("llm.key", tenant.KeyID), attribute.Bool("llm.admitted", err == nil && dec.ok))
		span.End()
	}
	if err != nil {
		(&openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "quota_store_unavailable", RetryAfter: 5 * time.Second,
			Message: "the quota store is unreachable, so requests cannot be counted; try again shortly"}).Write(w)
		return nil
	}
	if !dec.ok || q.RateLimitHeaders == "always" {
		setRateHeaders(w.Header(), adm, dec)
	}
	if !dec.ok {
		q.refuse(w, adm, dec)
		return nil
	}
	// Usage is settled before the answer completes (before a stream's
	// [DONE]), so a client that has its answer can count on its usage
	// being counted: its next request sees it.
	if !req.Stream {
		err = next.ServeHTTP(w, r)
		q.settle(r, st, adm, m, tenant)
		return err
	}
	sw := &settleWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
		q: q, r: r, st: st, adm: adm, m: m, tenant: tenant}
	err = next.ServeHTTP(sw, r)
	sw.settle()
	return err
}

// settleWriter settles a stream's usage just before its [DONE] event,
// which the router writes on its own, after the usage chunk, or when the
// handler returns without one. The router writes from the handler's
// goroutine, so settling needs no lock.
type settleWriter struct {
	caddyhttp.ResponseWriterWrapper
	q       *Quota
	r       *http.Request
	st      store
	adm     *admission
	m       *catalog.Model
	tenant  *tenancy.Tenant
	settled bool
}

func (w *settleWriter) settle() {
	if !w.settled {
		w.settled = true
		w.q.settle(w.r, w.st, w.adm, w.m, w.tenant)
	}
}

var doneEvent = []byte("data: [DONE]")

func (w *settleWriter) Write(b []byte) (int, error) {
	if bytes.HasPrefix(b, doneEvent) {
		w.settle()
	}
	return w.ResponseWriterWrapper.Write(b)
}

// tenantPath is the tenant's deepest node's path (org/team/project).
func tenantPath(t *tenancy.Tenant) string {
	return cmp.Or(t.Project, t.Team, t.Org)
}

// keepsBodies says whether the request log keeps the tenant's bodies.
func (q *Quota) keepsBodies(t *tenancy.Tenant) bool {
	return q.app.KeepsBodies(tenantPath(t))
}

// authenticate finds the request's tenant by its key or, without one, by
// the console session it carries (the playground; llm.App.SessionTenant).
func (q *Quota) authenticate(r *http.Request) (*tenancy.Tenant, error) {
	key := bearer(r)
	if key == "" {
		if t, ok, err := q.app.SessionTenant(r); ok || err != nil {
			return t, err
		}
	}
	return q.app.Authenticate(key)
}

// bearer is the request's key: Authorization: Bearer, or x-api-key as
// Anthropic's clients send it.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return strings.TrimSpace(k)
	}
	return ""
}

// plan builds the admission: the estimate and each level's counters.
func (q *Quota) plan(t *tenancy.Tenant, req *openai.Request, m *catalog.Model) *admission {
	at := now()
	est := req.PromptTokensEstimate()
	if req.Endpoint != openai.Embeddings {
		// Each of the n choices may use the whole completion; the prompt
		// is counted once.
		var completion int64
		limit := tenancy.CapOf(m, t).Tokens // the router refuses more, sends it for none
		switch {
		case req.MaxTokens > 0 && (limit == 0 || req.MaxTokens <= limit):
			completion = req.MaxTokens
		case limit > 0 && (m.ContextLength == 0 || limit < m.ContextLength):
			completion = limit
		case m.ContextLength > 0:
			completion = max(m.ContextLength-est, 0)
		default:
			completion = q.DefaultMaxTokens
		}
		est = addTimes(est, completion, max(req.N, 1))
	}
	a := &admission{now: at, est: est, lease: time.Duration(q.Lease), model: m.Name}
	a.levels = a.levelBuf[:0]
	if len(t.Levels) > len(a.levelBuf) {
		a.levels = make([]levelPlan, 0, len(t.Levels))
	}
	a.levels = a.levels[:len(t.Levels)]
	_, redis := q.store.(*redisStore)
	if redis {
		a.reqID, a.redisArgs = newReqID(), redisArgsOf(t)
	}
	for i := range t.Levels {
		l := &t.Levels[i]
		lp := &a.levels[i]
		lp.level = l
		lp.limits = levelLimits(l)
		if redis {
			lp.win = nodeKeys(l, at)
		}
	}
	return a
}

// addTimes returns a + b*n for non-negative values, saturating at the
// largest int64 instead of overflowing.
func addTimes(a, b, n int64) int64 {
	if b > 0 && n > (math.MaxInt64-a)/b {
		return math.MaxInt64
	}
	return a + b*n
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Quota)(nil)
	_ caddy.Validator             = (*Quota)(nil)
	_ caddy.CleanerUpper          = (*Quota)(nil)
	_ caddyhttp.MiddlewareHandler = (*Quota)(nil)
)
