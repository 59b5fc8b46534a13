// Package llmcache is the llm_cache HTTP handler: exact and semantic
// answers to repeated and similar questions, scoped per tenant, replayed
// as streams when the client streams.
package llmcache

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/openai"
	_ "github.com/llmgw/llmgw/modules/openai/messagesapi"  // Enter translates Messages requests
	_ "github.com/llmgw/llmgw/modules/openai/responsesapi" // and Responses requests
)

func init() {
	caddy.RegisterModule(Cache{})
}

// Cache answers chat and text completions from earlier answers: exactly
// the same request (canonical JSON: key order and whitespace do not
// matter), or, with semantic matching on, a similar last question in the
// same context. Entries are scoped per tenant when llm_quota runs first.
//
// Every answer it sees carries x-llmgw-cache: hit-exact, hit-semantic
// (with ";similarity=0.93"), miss or bypass. Hits report their prompt
// tokens as cached (usage.prompt_tokens_details.cached_tokens), and quotas
// charge them nothing. Streamed misses are stored only when they
// completed; errors, cut streams and refusals never are. A request's
// Cache-Control: no-cache skips the lookup, no-store skips storing.
type Cache struct {
	// TTL of an entry. Default: 1h.
	TTL caddy.Duration `json:"ttl,omitempty"`
	// MaxMemory bounds the entries, in bytes. Default: 256 MiB.
	MaxMemory int64 `json:"max_memory,omitempty"`
	// Models whose answers are cached: catalog names or globs.
	// Default: every model.
	Models []string `json:"models,omitempty"`
	// MaxTemperature skips requests whose temperature is above it.
	// Default: no limit.
	MaxTemperature *float64 `json:"max_temperature,omitempty"`
	// Scope shares entries between callers: key, project, team, org or
	// global. Without llm_quota every caller is global. Default: project.
	Scope string `json:"scope,omitempty"`
	// Semantic, when set, also answers similar questions.
	Semantic *Semantic `json:"semantic,omitempty"`
	// Redis, such as redis://host:6379, shares entries between instances:
	// each kept entry is written there with its TTL and announced, the
	// others index it, and a starting instance warms from it. Lookups stay
	// in this process.
	Redis string `json:"redis,omitempty"`
	// Admission is which answers a full cache keeps: "frequency" keeps
	// one only when its question was asked more often lately than the
	// entry it would evict (TinyLFU), so that questions asked once do not
	// push out those asked again; "all" keeps every answer, evicting the
	// least recently used. A cache with room keeps every answer either
	// way. Default: frequency.
	Admission string `json:"admission,omitempty"`

	app        *llm.App
	store      *entries
	batch      *batcher // embedding calls, when Semantic.Embedder is set
	poolKey    string
	unregister func()
	logger     *zap.Logger
}

// Semantic configures matching similar questions.
type Semantic struct {
	// Embedder is a catalog model that serves /v1/embeddings, used to
	// embed questions. Default: the built-in matcher, which needs no model:
	// it is lexical (the same content words once spelling, inflection,
	// synonyms, aliases, framing and typos are set aside), so it misses
	// paraphrases in other words; an embedding model finds more.
	// Whichever finds a candidate, the verifier refuses one that differs
	// in negation, numbers, order, tense, names, units or other words that
	// carry the answer (see the README).
	Embedder string `json:"embedder,omitempty"`
	// EmbedTimeout bounds one embedding call; on timeout or error the
	// request is looked up exactly only. Default: 2s.
	EmbedTimeout caddy.Duration `json:"embed_timeout,omitempty"`
	// EmbedderThreshold is the least cosine of the embedder's vectors for
	// a hit, in (0, 1]: each model spreads its cosines differently, so the
	// threshold goes with the model (in the Caddyfile, embedder <model>
	// [<threshold>]). Default: Threshold.
	EmbedderThreshold float64 `json:"embedder_threshold,omitempty"`
	// Threshold is the least similarity for a hit, in (0, 1]: the cosine
	// of the embeddings, or with the built-in matcher the cosine of the
	// questions' words and word pairs (1 when they say the same words in
	// the same order). Default: 0.9: on the project's paraphrase sets the
	// built-in matcher matches 80% of the paraphrases and none of the
	// near-misses there; at 0.8 it also answers questions whose roles are
	// swapped ("can a dog eat cat food" / "can a cat eat dog food").
	Threshold float64 `json:"threshold,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Cache) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_cache",
		New: func() caddy.Module { return new(Cache) },
	}
}

var pool = caddy.NewUsagePool()

// Provision sets defaults and loads (or reuses) the entry store.
func (c *Cache) Provision(ctx caddy.Context) error {
	c.logger = ctx.Logger()
	if c.TTL == 0 {
		c.TTL = caddy.Duration(time.Hour)
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = 256 << 20
	}
	if c.Scope == "" {
		c.Scope = "project"
	}
	if c.Semantic != nil && c.Semantic.Threshold == 0 {
		c.Semantic.Threshold = defaultThreshold
	}
	if c.Semantic != nil && c.Semantic.EmbedTimeout == 0 {
		c.Semantic.EmbedTimeout = caddy.Duration(2 * time.Second)
	}
	a, err := ctx.App("llm")
	if err != nil {
		return err // the llm app's own error: Caddy makes one if none is configured
	}
	c.app = a.(*llm.App)
	if s := c.Semantic; s != nil && s.Embedder != "" {
		if _, err := c.app.Lookup(s.Embedder); err != nil {
			return fmt.Errorf("llm_cache: semantic embedder: %w", err)
		}
		c.batch = newBatcher(func(ctx context.Context, texts []string) ([][]float32, error) {
			return c.app.Embeddings(ctx, s.Embedder, texts)
		}, time.Duration(s.EmbedTimeout))
	}
	c.poolKey = "entries:" + strconv.FormatInt(c.MaxMemory, 10) + ":" + c.Redis
	v, _, err := pool.LoadOrNew(c.poolKey, func() (caddy.Destructor, error) {
		s, err := newEntries(c.MaxMemory)
		if err != nil || c.Redis == "" {
			return s, err
		}
		if s.shared, err = newShared(c.Redis, s, c.logger); err != nil {
			return nil, fmt.Errorf("llm_cache redis %q: %w", c.Redis, err)
		}
		return s, nil
	})
	if err != nil {
		return err
	}
	c.store = v.(*entries)
	c.unregister = register(c.app, c.poolKey, c.store)
	return registerMetrics(ctx.GetMetricsRegistry())
}

// Validate checks the configuration.
func (c *Cache) Validate() error {
	switch c.Scope {
	case "key", "project", "team", "org", "global":
	default:
		return fmt.Errorf("llm_cache: scope %q: use key, project, team, org or global", c.Scope)
	}
	switch c.Admission {
	case "", admitFrequency, admitAll:
	default:
		return fmt.Errorf("llm_cache: admission %q: use frequency or all", c.Admission)
	}
	if c.TTL < 0 || c.MaxMemory < 0 {
		return fmt.Errorf("llm_cache: ttl and max_memory must not be negative")
	}
	if s := c.Semantic; s != nil && (s.Threshold <= 0 || s.Threshold > 1) {
		return fmt.Errorf("llm_cache: semantic threshold %v must be in (0, 1]", s.Threshold)
	}
	if s := c.Semantic; s != nil && (s.EmbedderThreshold < 0 || s.EmbedderThreshold > 1) {
		return fmt.Errorf("llm_cache: semantic embedder_threshold %v must be in (0, 1]", s.EmbedderThreshold)
	}
	return nil
}

// Cleanup releases the entry store; the next config keeps it.
func (c *Cache) Cleanup() error {
	if c.unregister != nil {
		c.unregister()
	}
	if c.poolKey != "" {
		_, _ = pool.Delete(c.poolKey)
	}
	return nil
}

const header = "X-Llmgw-Cache"

// Admission policies (see Cache.Admission).
const (
	admitFrequency = "frequency"
	admitAll       = "all"
)

// defaultThreshold is semantic's default least similarity, chosen from
// the project's paraphrase sets (testdata, paraphrase_test.go).
const defaultThreshold = 0.9

// ServeHTTP answers from the cache or passes the request on, keeping the
// answer when it completes.
func (c *Cache) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	w, tracked := openai.Track(w, r)
	if tracked != nil {
		defer c.app.RecordRequest(tracked)
	}
	w, req, err := openai.Enter(w, r)
	if err != nil || req.Endpoint == openai.Embeddings || req.CountOnly {
		return next.ServeHTTP(w, r)
	}
	m, err := c.app.Lookup(req.Model)
	if err != nil || !c.enabled(m.Name, req) {
		c.store.bypass.Add(1)
		if m != nil {
			countOutcome(m.Name, "bypass")
		}
		w.Header().Set(header, "bypass")
		logOutcome(r, "bypass")
		return next.ServeHTTP(w, r)
	}
	noCache, noStore := cacheControl(r)
	scope := scopeOf(r, c.Scope)
	if req.CacheScope != "" {
		scope += "|" + req.CacheScope // what a handler before added to the prompt
	}
	q, err := newQuery(scope, m.Name, req, c.Semantic != nil, c.embedFunc(r))
	if err != nil {
		w.Header().Set(header, "bypass")
		return next.ServeHTTP(w, r)
	}
	if noCache {
		c.store.bypass.Add(1)
		countOutcome(m.Name, "bypass")
		w.Header().Set(header, "bypass")
		logOutcome(r, "bypass")
	} else if e, sim, semantic, hit := c.tracedLookup(r, q); hit {
		c.serve(w, r, req, e, sim, semantic)
		return nil
	} else {
		c.store.misses.Add(1)
		countOutcome(m.Name, "miss")
		w.Header().Set(header, "miss")
		logOutcome(r, "miss")
	}
	if noStore {
		return next.ServeHTTP(w, r)
	}
	if c.Admission != admitAll && !c.store.admits(q.id, q.set, time.Now().UnixNano()) {
		// A full cache would not keep this answer: it is not copied.
		c.store.notAdmitted.Add(1)
		return next.ServeHTTP(w, r)
	}
	req.Watched = true
	tw := &teeWriter{limit: maxEntryBytes, keep: keepAnswer, cache: c, r: r, q: q}
	tw.ResponseWriterWrapper = &tw.rww
	tw.rww.ResponseWriter = w
	err = next.ServeHTTP(tw, r)
	if err == nil && !tw.kept {
		c.keep(r, q, tw)
	}
	tw.release()
	return err
}

// embedFunc returns how questions are embedded for this request.
func (c *Cache) embedFunc(r *http.Request) func(string) []float32 {
	if c.Semantic == nil || c.Semantic.Embedder == "" {
		return nil // the built-in matcher
	}
	return func(q string) []float32 {
		v, err := c.batch.embed(r.Context(), q)
		if err != nil {
			c.logger.Warn("embedding a question; looking up exactly only", zap.String("embedder", c.Semantic.Embedder), zap.Error(err))
			return nil
		}
		return normalize(v)
	}
}

// maxEntryBytes bounds one answer kept; longer ones are not cached.
const maxEntryBytes = 1 << 20

func (c *Cache) enabled(model string, req *openai.Request) bool {
	if req.N > 1 {
		return false // n answers are asked to differ
	}
	if c.MaxTemperature != nil && req.Temperature != nil && *req.Temperature > *c.MaxTemperature {
		return false
	}
	if len(c.Models) == 0 {
		return true
	}
	for _, g := range c.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// tracedLookup is lookup in its own span when the request is traced.
func (c *Cache) tracedLookup(r *http.Request, q *query) (*entry, float32, bool, bool) {
	_, span, traced := openai.StartSpan(r.Context(), "llm.cache")
	e, sim, semantic, hit := c.lookup(q)
	if traced {
		span.SetAttributes(attribute.Bool("llm.cache.hit", hit), attribute.Bool("llm.cache.semantic", semantic))
		span.End()
	}
	return e, sim, semantic, hit
}

// lookup finds an exact entry, or the most similar one in the question's
// context, with its similarity.
func (c *Cache) lookup(q *query) (e *entry, sim float32, semantic, hit bool) {
	if c.Admission != admitAll {
		c.store.seen(q.id, q.set)
	}
	if e, ok := c.store.get(q.key); ok {
		return e, 1, false, true
	}
	if c.Semantic == nil || q.an == nil {
		return nil, 0, false, false
	}
	e, sim = c.store.nearest(q, c.threshold(q))
	if e == nil {
		return nil, sim, true, false
	}
	return e, sim, true, true
}

// threshold is the least similarity for a semantic hit on q.
func (c *Cache) threshold(q *query) float64 {
	if q.vec != nil && c.Semantic.EmbedderThreshold > 0 {
		return c.Semantic.EmbedderThreshold
	}
	return c.Semantic.Threshold
}

func (c *Cache) serve(w http.ResponseWriter, r *http.Request, req *openai.Request, e *entry, sim float32, semantic bool) {
	h := w.Header()
	if semantic {
		c.store.semantic.Add(1)
		countOutcome(e.model, "hit-semantic")
	} else {
		c.store.exact.Add(1)
		countOutcome(e.model, "hit-exact")
	}
	if semantic {
		h.Set(header, "hit-semantic;similarity="+strconv.FormatFloat(float64(min(1, max(0, sim))), 'f', 3, 32))
	} else {
		h.Set(header, "hit-exact")
	}
	ans := e.answer()
	u := ans.Usage
	openai.SetUsage(r, openai.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		TotalTokens: u.PromptTokens + u.CompletionTokens, Cached: true})
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.llm.cache", h.Get(header))
	}
	logOutcome(r, h.Get(header))
	if req.Stream {
		ans.writeStream(w, req.Model, req.IncludeUsage)
		return
	}
	ans.writeWhole(w, req.Model)
}

// keep stores a completed, successful answer.
func (c *Cache) keep(r *http.Request, q *query, tw *teeWriter) {
	if tw.status != http.StatusOK || tw.overflow {
		return
	}
	var ans *answer
	var err error
	u, haveUsage := openai.GetUsage(r)
	switch {
	case tw.sse:
		ans, err = assemble(tw.body(), u)
	case haveUsage:
		ans, err = parseWhole(tw.body(), &u)
	default:
		ans, err = parseWhole(tw.body(), nil)
	}
	if err != nil || ans == nil {
		return
	}
	c.store.put(&entry{key: q.key, bucket: q.bucket, question: q.question, an: q.an, vec: q.vec, ans: ans,
		expires: time.Now().Add(time.Duration(c.TTL)), scope: q.scope, model: q.model})
}

// teeWriter copies what the router writes, up to a limit. It keeps the
// answer just before its last bytes go out (a stream's [DONE], a whole
// answer's final write), so a client that has the answer finds it cached.
type teeWriter struct {
	*caddyhttp.ResponseWriterWrapper
	status   int
	sse      bool
	length   int // Content-Length of a whole answer, -1 if unknown
	buf      bytes.Buffer
	whole    []byte // a whole answer written at once, while keep reads it
	limit    int
	overflow bool
	keep     func(*teeWriter) // nil for none
	cache    *Cache           // keepAnswer's: the cache, the request and its query
	r        *http.Request
	q        *query
	rww      caddyhttp.ResponseWriterWrapper // what ResponseWriterWrapper points to, in one allocation with the tee
	kept     bool
	pooled   *[]byte // where buf's memory came from, to give back
}

// teeBuffers keep the memory of answers copied: an answer is parsed into
// what is kept, so its bytes are free again once the request is done.
var teeBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// release gives buf's memory back for another request; the tee is not
// used after it.
func (t *teeWriter) release() {
	if t.pooled == nil {
		return
	}
	if b := t.buf.Bytes(); cap(b) > 0 && cap(b) <= 64<<10 {
		*t.pooled = b[:0]
		teeBuffers.Put(t.pooled)
	}
	t.pooled, t.buf = nil, bytes.Buffer{}
}

// body is what was written: the answer to keep.
func (t *teeWriter) body() []byte {
	if t.whole != nil {
		return t.whole
	}
	return t.buf.Bytes()
}

func (t *teeWriter) WriteHeader(status int) {
	if t.status == 0 {
		t.status = status
		ct := t.Header().Get("Content-Type")
		t.sse = len(ct) >= 17 && ct[:17] == "text/event-stream"
		t.length = -1
		if n, err := strconv.Atoi(t.Header().Get("Content-Length")); err == nil {
			t.length = n
		}
	}
	t.ResponseWriterWrapper.WriteHeader(status)
}

func (t *teeWriter) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if !t.sse && t.buf.Len() == 0 && len(b) == t.length && t.keep != nil && !t.kept && !t.overflow && len(b) <= t.limit {
		// The whole answer in one write, as the router writes one: kept
		// from b itself, without a copy (keep copies what it keeps).
		t.kept, t.whole = true, b
		t.keep(t)
		t.whole = nil
		return t.ResponseWriterWrapper.Write(b)
	}
	if !t.overflow {
		if t.buf.Cap() == 0 {
			// A buffer kept from an earlier request, sized for the whole
			// answer when its length is known.
			t.pooled = teeBuffers.Get().(*[]byte)
			t.buf = *bytes.NewBuffer((*t.pooled)[:0])
			if t.length > 0 && t.length <= t.limit {
				t.buf.Grow(t.length)
			}
		}
		if t.buf.Len()+len(b) > t.limit {
			t.overflow = true
			t.buf = bytes.Buffer{}
		} else {
			t.buf.Write(b)
		}
	}
	if t.keep != nil && !t.kept && !t.overflow && (t.sse && bytes.HasPrefix(b, doneEvent) || !t.sse && t.buf.Len() == t.length) {
		t.kept = true
		t.keep(t)
	}
	return t.ResponseWriterWrapper.Write(b)
}

var doneEvent = []byte("data: [DONE]")

// keepAnswer is a tee's keep in the cache: a function, not a closure,
// so a request does not allocate one.
func keepAnswer(t *teeWriter) { t.cache.keep(t.r, t.q, t) }

// Interface guards
var (
	_ caddy.Provisioner           = (*Cache)(nil)
	_ caddy.Validator             = (*Cache)(nil)
	_ caddy.CleanerUpper          = (*Cache)(nil)
	_ caddyhttp.MiddlewareHandler = (*Cache)(nil)
	_ caddy.Destructor            = (*entries)(nil)
)
