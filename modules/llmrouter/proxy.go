package llmrouter

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
	"github.com/llmgw/llmgw/modules/openai/messagesapi"
	"github.com/llmgw/llmgw/plugins/engine"
)

// errFirstByteTimeout cancels an upstream request that sent no headers in
// time.
var errFirstByteTimeout = errors.New("upstream sent no response within first_byte_timeout")

// attempt is the outcome of one upstream try.
type attempt struct {
	served bool  // a response was written; stop
	err    error // why the try failed, when not served
	// tried says the request went to the upstream; status (0: no
	// answer), its Retry-After and ttfb are what came back.
	tried      bool
	status     int
	retryAfter string
	ttfb       time.Duration
	header     http.Header // the answer's headers (rate limits)
}

// serveGenerate serves a request that a model answers: to the model or,
// when it fails before its answer's first byte, its fallbacks.
func (rt *Router) serveGenerate(w http.ResponseWriter, r *http.Request, start time.Time) {
	w, req, m, err := rt.admit(w, r)
	if err != nil {
		rt.writeError(w, r, err, start)
		return
	}
	var plan routePlan
	served, name, last := rt.tryCandidates(w, r, req, rt.candidates(r, req, m, &plan), &plan, start)
	if !served {
		rt.writeError(w, r, last, start)
		return
	}
	if _, ok := m.ProviderOf(name); name != m.Name && !ok {
		lf := openai.Log(r)
		if lf.Route = "fallback"; m.Canary != nil && name == m.Canary.Model {
			lf.Route = "canary"
		}
	}
}

// admit reads the request and finds its model, within the router's
// limits, and sets {http.llm.model}.
func (rt *Router) admit(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *openai.Request, *catalog.Model, error) {
	w, req, err := openai.Enter(w, r)
	if req != nil {
		lf := openai.Log(r)
		lf.API, lf.Asked, lf.Stream = req.APIName(), req.Model, req.Stream
	}
	if err != nil {
		return w, req, nil, err
	}
	m, err := rt.app.LookupLatest(req.Model)
	if err == nil {
		err = rt.checkLimits(req, m)
	}
	if err == nil && rt.app.Speaks(m, engine.CapComfyUI) {
		err = workflowModel(m, req)
	}
	if err == nil && m.Licence != nil {
		err = licenceError(rt.app.LicenceRefusal(r.Context(), m, tenancy.ProjectOf(r)))
	}
	if err == nil {
		err = capOutput(r, req, m)
	}
	if err != nil {
		return w, req, nil, err
	}
	repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if repl != nil {
		repl.Set("http.llm.model", m.Name)
	}
	return w, req, m, nil
}

// workflowModel refuses a request of the text APIs to a model whose
// replicas run image workflows (ComfyUI's API).
func workflowModel(m *catalog.Model, req *openai.Request) error {
	return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "model_not_supported", Param: "model",
		Message: fmt.Sprintf("the model %s runs image workflows (its engine, %s, speaks ComfyUI's API), not %s requests; ask a text model (GET /v1/models lists them)",
			m.Name, m.Engine, req.APIName())}
}

// licenceError is a licence refusal as the API's 403 (nil stays nil).
func licenceError(err error) error {
	if err == nil {
		return nil
	}
	return &openai.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "licence_not_accepted", Param: "model", Message: err.Error()}
}

// tryCandidates sends the request to the candidates in turn until one
// serves it, and reports whether one did (and which) and, if not, why the
// last one failed. A replica that could not be reached is followed, up to twice,
// by another replica of the same candidate; a client that left ends the
// tries, and so does a first_byte_timeout, but for a provider's (below).
//
// Candidates that are the providers of a model (see plan) are tried
// once each: a provider that fails goes on to the next, and so, once per
// request, does one that sent no headers within first_byte_timeout.
func (rt *Router) tryCandidates(w http.ResponseWriter, r *http.Request, req *openai.Request, candidates []string, plan *routePlan, start time.Time) (bool, string, error) {
	var last error
	retries := 0
	var failed *fleet.Replica // a replica of candidates[i] that could not be reached
	for i := 0; i < len(candidates); i++ {
		name := candidates[i]
		rep, release, err := rt.app.Reacquire(r.Context(), name, rt.selector(r, req, name), failed)
		failed = nil
		if err != nil {
			last = err
			if r.Context().Err() != nil {
				break
			}
			continue
		}
		c, isProv := plan.at(i)
		if isProv {
			plan.beforeTry(w, r, c)
		}
		a := rt.proxy(w, r, req, rep, name, i == len(candidates)-1, start)
		release()
		if isProv {
			plan.afterTry(r, c, a)
		}
		if a.served {
			return true, name, nil
		}
		last = a.err
		if r.Context().Err() != nil {
			break // the client left
		}
		if errors.Is(a.err, errFirstByteTimeout) && !plan.afterTimeout(i) {
			break // waited long enough: no fallback
		}
		var ue *upstreamError
		if errors.As(a.err, &ue) && retries < 2 && (!isProv || i == len(candidates)-1) {
			// The replica could not be reached (or, on another node, is
			// gone): up to twice, another replica of the same model, or
			// the one replacing it (held like an on-demand start), never
			// a failed one unless it is cleared.
			retries++
			failed = rep
			i--
			continue
		}
		if c := rt.logger.Check(zapcore.DebugLevel, "trying fallback"); c != nil && i+1 < len(candidates) {
			c.Write(zap.String("model", name), zap.String("fallback", candidates[i+1]), zap.Error(a.err))
		}
	}
	return false, "", last
}

// selector is the policy that picks a replica of the candidate name for
// the request.
func (rt *Router) selector(r *http.Request, req *openai.Request, name string) fleet.Selector {
	if rp, ok := rt.policy.(requestPolicy); ok {
		return rp.forRequest(r, req, name)
	}
	return rt.policy
}

// candidates are the model and the fallbacks the caller may use: with
// llm_quota in front, a fallback outside the key's models is skipped. A
// model with a canary sends its share of requests to the canary first,
// with the model itself next. Under a policy that keeps conversations
// together (prefix_affinity) the share is of conversations: every turn of
// one goes the same way, where its prompt is cached.
//
// A model with providers stands for its providers, in the order its
// policy tries them (see plan).
func (rt *Router) candidates(r *http.Request, req *openai.Request, m *catalog.Model, plan *routePlan) []string {
	tenant, limited := tenancy.TenantOf(r)
	// A canary or fallback serves the caller only if the caller may use
	// it: its tenant's models, and a licence accepted for it.
	allowed := func(name string) bool {
		f, err := rt.app.Lookup(name)
		if err != nil || f.Licence != nil && rt.app.LicenceRefusal(r.Context(), f, tenancy.ProjectOf(r)) != nil {
			return false
		}
		return !limited || tenant.Allowed(name, f.Name)
	}
	out := make([]string, 0, 2+len(m.Fallbacks)+len(m.Providers))
	if c := m.Canary; c != nil && c.Share > 0 && rt.canaryDraw(r, req) < c.Share && allowed(c.Model) {
		out = append(out, c.Model)
	}
	if len(m.Providers) > 0 {
		out = rt.providersOf(m, plan, out) // providers_route.go
	} else {
		out = append(out, m.Name)
	}
	for _, fb := range m.Fallbacks {
		if allowed(fb) {
			out = append(out, fb)
		}
	}
	return out
}

// canaryDraw is a number in [0, 1) that sends the request to a canary
// when below its share: random, or under a conversation-keeping policy
// one number per conversation.
func (rt *Router) canaryDraw(r *http.Request, req *openai.Request) float64 {
	if p, ok := rt.policy.(*PrefixAffinity); ok {
		if c := p.conversation(r, req); c != 0 {
			return float64(c>>11) / (1 << 53)
		}
	}
	return rand.Float64()
}

// How a request reaches a replica.
const (
	viaChat     = iota // chat completions (or the client's own chat-family endpoint)
	viaNative          // the client's API, bytes unchanged: the engine speaks it
	viaMessages        // Anthropic Messages: the engine speaks nothing else
)

// via picks how req reaches a replica of model: in the client's own
// API when the engine speaks it and no handler reads or changed the
// request's chat form, else in chat completions, translated to Messages
// for an engine that speaks only that.
func (rt *Router) via(req *openai.Request, model string) int {
	m, err := rt.app.Lookup(model)
	if err != nil {
		return viaChat
	}
	if req.API != openai.APIChat && !req.Watched && !req.Changed() && rt.app.Speaks(m, req.API) && openai.PassesThrough(req) {
		return viaNative
	}
	if req.Endpoint == openai.ChatCompletions && !rt.app.Speaks(m, engine.CapChat) && rt.app.Speaks(m, engine.CapMessages) {
		return viaMessages
	}
	return viaChat
}

// proxy sends req to one replica. A failure that allows a fallback (connect
// error, 5xx, 429) on a non-final candidate is returned unserved.
// name is the catalog name rep was acquired for: the model's, or an
// adapter's, whose request members are then set.
func (rt *Router) proxy(w http.ResponseWriter, r *http.Request, req *openai.Request, rep *fleet.Replica, name string, final bool, start time.Time) attempt {
	mode := rt.via(req, rep.Model)
	body, endpoint, err := upstreamBody(r, req, rep, name, mode)
	if err != nil {
		return attempt{err: openai.BadRequest("invalid_json", "re-encoding the request: %v", err)}
	}
	openai.Log(r).KeepRequest(body)
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if sctx, span, ok := openai.StartSpan(ctx, "llm.upstream"); ok {
		span.SetAttributes(attribute.String("llm.model", rep.Model), attribute.String("llm.replica", rep.ID))
		defer span.End()
		ctx = sctx
	}
	resp, sent, err := rt.send(ctx, cancel, r, req, rep, mode, fleet.UpstreamURL(rep.BaseURL, endpoint), body)
	if err != nil {
		return attempt{err: err, tried: true}
	}
	defer resp.Body.Close()
	ttfb := time.Since(sent)
	a := attempt{tried: true, status: resp.StatusCode, ttfb: ttfb, header: resp.Header}
	if resp.StatusCode == http.StatusTooManyRequests {
		a.retryAfter = resp.Header.Get("Retry-After")
	}
	if a.err = rt.unserved(resp, rep, final); a.err != nil {
		if a.status < http.StatusBadGateway || resp.Header.Get(cluster.PeerErrorHeader) == "" {
			return a
		}
		a.status = 0 // another node's replica was not reached
		return a
	}
	a.ttfb = rt.answer(w, r, req, rep, resp, mode, start, sent, ttfb)
	a.served = true
	return a
}

// upstreamBody is the body sent to rep and the endpoint it goes to: the
// client's own bytes for its API (mode viaNative), else chat completions,
// translated to Messages for mode viaMessages, with the model the
// replica knows and an adapter's members when name is an adapter's.
func upstreamBody(r *http.Request, req *openai.Request, rep *fleet.Replica, name string, mode int) ([]byte, string, error) {
	var (
		body     []byte
		err      error
		endpoint = req.Endpoint
	)
	switch mode {
	case viaNative:
		body, err = req.NativeBody(rep.UpstreamModel)
		endpoint, _ = openai.EndpointOf(r)
	case viaMessages:
		body, err = req.UpstreamBody(rep.UpstreamModel)
		if err == nil {
			body, err = messagesapi.ChatToMessagesBody(body, rep.UpstreamModel)
		}
		endpoint = openai.Messages
	default:
		body, err = req.UpstreamBody(rep.UpstreamModel)
	}
	if mem := rep.AdapterMembers(name); mem != nil && err == nil {
		body, err = fleet.SetMembers(body, mem)
	}
	return body, endpoint, err
}

// send posts body to url on rep and returns the response's headers and
// when the request was sent. A provider that refuses the replica's key
// (401, 429) while it has others sees the request again with the next
// one. The error is the cause of ctx's cancellation (errFirstByteTimeout),
// an *upstreamError for a replica that could not be reached, or the
// client's own when it left.
func (rt *Router) send(ctx context.Context, cancel context.CancelCauseFunc, r *http.Request, req *openai.Request, rep *fleet.Replica, mode int, url string, body []byte) (*http.Response, time.Time, error) {
	var tr http.RoundTripper = rt.transport
	if rep.Transport != nil {
		tr = rep.Transport // a replica on another node, through its llmgw
	}
	for tries := rep.Keys(); ; tries-- {
		up, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, time.Time{}, err
		}
		key := rep.PickKey(time.Now().UnixNano())
		upstreamHeaders(ctx, up, r, req, rep, mode, key)
		sent := time.Now()
		timer := time.AfterFunc(time.Duration(rt.FirstByteTimeout), func() { cancel(errFirstByteTimeout) })
		resp, err := tr.RoundTrip(up)
		timer.Stop()
		if err != nil {
			return nil, sent, rt.sendError(ctx, r, rep, err)
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusTooManyRequests {
			rep.RestKey(key, keyRest(resp))
		}
		if tries > 1 && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusTooManyRequests) {
			// A provider refused this key (revoked, or out of quota):
			// it rests (for its Retry-After on a 429) and this request
			// goes on with another.
			drain(resp.Body)
			resp.Body.Close()
			rt.logger.Warn("provider refused a key; trying another", zap.String("replica", rep.ID), zap.Int("status", resp.StatusCode))
			continue
		}
		return resp, sent, nil
	}
}

// keyRest is until when (unix nanos) a key the provider refused rests:
// a 429's Retry-After, or 5 minutes for a 401.
func keyRest(resp *http.Response) int64 {
	now := time.Now().UnixNano()
	if resp.StatusCode == http.StatusUnauthorized {
		return now + int64(5*time.Minute)
	}
	return now + int64(parseRetryAfter(resp.Header.Get("Retry-After"), now))
}

// upstreamHeaders sets up's headers: the body's type, the replica's own
// (with key as the one of its keys sent), the client's API version and
// flags for an engine that speaks the client's API, and the trace.
func upstreamHeaders(ctx context.Context, up, r *http.Request, req *openai.Request, rep *fleet.Replica, mode int, key int) {
	up.Header = make(http.Header, 4+len(rep.Header))
	up.Header["Content-Type"] = jsonCT
	if req.Stream {
		up.Header["Accept"] = sseCT
	}
	if mode == viaNative {
		copyClientHeaders(up.Header, r.Header)
	}
	rep.SetHeadersKey(up.Header, key)
	openai.InjectTrace(ctx, up.Header)
}

// sendError is why a request to rep got no response: the cause of ctx's
// cancellation while the client waits, an *upstreamError (reported to
// the llm app) when the replica could not be reached, or err as it is
// once the client left.
func (rt *Router) sendError(ctx context.Context, r *http.Request, rep *fleet.Replica, err error) error {
	if r.Context().Err() != nil {
		return err // the client left
	}
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	rt.app.ReportFailure(rep)
	return &upstreamError{replica: rep.ID, err: err}
}

// unserved is why resp does not go to the client, or nil when it does:
// another node saying its replica is gone or did not answer (an
// *upstreamError, tried again like a connect error), or a status that
// allows a fallback (5xx, 429) on a candidate that is not the last.
func (rt *Router) unserved(resp *http.Response, rep *fleet.Replica, final bool) error {
	if rep.Transport != nil && resp.StatusCode >= http.StatusBadGateway {
		if why := resp.Header.Get(cluster.PeerErrorHeader); why != "" {
			// Another node's endpoint says its replica is gone or did
			// not answer: like a connect error, another replica is tried.
			drain(resp.Body)
			rt.app.ReportFailure(rep)
			return &upstreamError{replica: rep.ID, err: fmt.Errorf("its node answered %s", why)}
		}
	}
	if retryable(resp.StatusCode) && !final {
		drain(resp.Body)
		return fmt.Errorf("replica %s answered %d", rep.ID, resp.StatusCode)
	}
	return nil
}

// drain reads what is left of a body that is not forwarded, up to 64
// KiB, so that its connection can be used again.
func drain(body io.Reader) { _, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10)) }

// answer forwards resp, rep's response, to the client: its headers with
// Server-Timing (and, with expose_replica, the replica's), its body
// translated as mode says, streamed or whole, and the request's metrics.
// It returns the upstream's time to first token: to a stream's first
// event, or ttfb for an answer sent whole.
func (rt *Router) answer(w http.ResponseWriter, r *http.Request, req *openai.Request, rep *fleet.Replica, resp *http.Response, mode int, start, sent time.Time, ttfb time.Duration) time.Duration {
	var eng string
	var price *catalog.Price
	if m, err := rt.app.Lookup(rep.Model); err == nil {
		eng, price = m.Engine, m.Price
	}
	h := w.Header()
	copyHeader(h, resp.Header)
	h.Add("Server-Timing", serverTiming(sent.Sub(start), ttfb))
	if rt.ExposeReplica {
		h.Set("X-Llmgw-Replica", rep.ID)
		h.Set("X-Llmgw-Node", rt.app.ReplicaNode(rep))
	}
	setVars(r, rep, eng)
	countRequest(rep.Model, eng, req.APIName(), resp.StatusCode)
	stream := req.Stream && resp.StatusCode == http.StatusOK && openai.IsSSE(resp.Header)
	conv := translation(req, resp, mode, stream)
	var st *streamState
	if stream {
		st = &streamState{native: mode == viaNative, log: openai.Log(r)}
		rt.stream(w, r, req, resp, st)
	} else {
		rt.whole(w, r, resp, mode == viaNative, conv)
	}
	if resp.StatusCode == http.StatusOK {
		u, _ := openai.GetUsage(r)
		observe(rep.Model, start, sent, st, u.PromptTokens, u.CompletionTokens)
		if price != nil {
			lf := openai.Log(r)
			lf.CostMicros, lf.HasCost = price.CostMicros(u.PromptTokens, u.CompletionTokens), true
		}
	}
	if st != nil && !st.first.IsZero() {
		return st.first.Sub(sent)
	}
	return ttfb
}

// translation readies resp for the client's API as mode says: a native
// answer is marked so on req; a Messages stream is translated as it is
// read, and a whole Messages answer (or error) by the function returned.
func translation(req *openai.Request, resp *http.Response, mode int, stream bool) func([]byte) ([]byte, error) {
	switch mode {
	case viaNative:
		req.Native = true
	case viaMessages:
		if stream {
			resp.Body = messagesapi.MessagesToChatStream(resp.Body)
		} else if resp.StatusCode < 300 {
			return messagesapi.MessagesToChatBody
		} else {
			return func(b []byte) ([]byte, error) { return messagesapi.MessagesErrorToOpenAI(resp.StatusCode, b), nil }
		}
	}
	return nil
}

// clientHeaders are the client's headers an engine speaking the client's
// API itself is given: the API's version and feature flags.
var clientHeaders = []string{"Anthropic-Version", "Anthropic-Beta", "Openai-Beta"}

func copyClientHeaders(dst, src http.Header) {
	for _, k := range clientHeaders {
		if v := src[k]; len(v) > 0 {
			dst[k] = v
		}
	}
}

var (
	jsonCT = []string{"application/json"}
	sseCT  = []string{"text/event-stream"}
)

func retryable(status int) bool { return status == http.StatusTooManyRequests || status >= 500 }

// hop-by-hop and length headers are not copied from upstream.
var skipHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Content-Length": true,
}

func copyHeader(dst, src http.Header) {
	for k, v := range src {
		if !skipHeaders[k] {
			dst[k] = v
		}
	}
}

func serverTiming(route, ttfb time.Duration) string {
	b := make([]byte, 0, 64)
	b = append(b, "llm_route;dur="...)
	b = strconv.AppendFloat(b, float64(route.Microseconds())/1000, 'f', 3, 64)
	if ttfb >= 0 {
		b = append(b, ", llm_upstream;desc=\"ttfb\";dur="...)
		b = strconv.AppendFloat(b, float64(ttfb.Microseconds())/1000, 'f', 3, 64)
	}
	return string(b)
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// putBuf returns a buffer to the pool unless an unusual answer grew it
// past 1 MiB, which the pool would otherwise keep alive.
func putBuf(b *[]byte) {
	if cap(*b) > 1<<20 {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// whole forwards a non-streamed answer, reading usage from it: conv, when
// set, translates it first; native says it is in the client's API.
func (rt *Router) whole(w http.ResponseWriter, r *http.Request, resp *http.Response, native bool, conv func([]byte) ([]byte, error)) {
	bp := bufPool.Get().(*[]byte)
	defer putBuf(bp)
	buf := bytes.NewBuffer((*bp)[:0])
	_, err := buf.ReadFrom(resp.Body)
	*bp = buf.Bytes()
	if err != nil {
		rt.writeError(w, r, &upstreamError{err: fmt.Errorf("reading the answer: %w", err)}, time.Time{})
		return
	}
	out := buf.Bytes()
	if conv != nil {
		if out, err = conv(out); err != nil {
			rt.writeError(w, r, &upstreamError{err: fmt.Errorf("translating the answer: %w", err)}, time.Time{})
			return
		}
	}
	if resp.StatusCode < 300 {
		var u openai.Usage
		var ok bool
		if native {
			u, ok = openai.NativeUsage(out, openai.Usage{})
		} else {
			u, ok = openai.FindUsage(out)
		}
		if ok {
			setUsage(r, u)
		}
	}
	openai.Log(r).KeepResponse(out)
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(out)
}

var (
	dataPrefix = []byte("data:")
	usageKey   = []byte(`"usage"`)
)

// stream forwards SSE events as they arrive: the first at once, later ones
// whenever no more bytes are waiting, so a burst costs one flush. It reads usage from the usage chunk, and drops that
// chunk when the client did not ask for it.
func (rt *Router) stream(w http.ResponseWriter, r *http.Request, req *openai.Request, resp *http.Response, st *streamState) {
	// Caddy's writers flush through Unwrap, which a ResponseController
	// follows and a type assertion does not.
	flusher := http.NewResponseController(w)
	w.WriteHeader(resp.StatusCode)
	if r.ProtoMajor >= 2 {
		// HTTP/2 clients may wait for headers before reading the stream;
		// on HTTP/1 the headers leave with the first event, one write.
		_ = flusher.Flush()
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	defer func() { br.Reset(nil); readerPool.Put(br) }()
	ep := bufPool.Get().(*[]byte)
	event := (*ep)[:0]
	defer func() { *ep = event; putBuf(ep) }()
	first := true
	defer settleCut(r, req, st)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			event = append(event, line...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == nil && len(bytes.TrimRight(line, "\r\n")) > 0 {
			continue // event not complete
		}
		if len(event) > 0 {
			if !rt.forwardEvent(w, r, req, event, st) {
				return
			}
			event = event[:0]
			if first {
				_ = flusher.Flush() // never hold back the first event
				first = false
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) && !st.sawDone && !st.native && req.API != openai.APIChat {
				// A chat stream that ended without [DONE]: the
				// translation learns of its end from it.
				_, _ = w.Write(doneLine)
			}
			if !errors.Is(err, io.EOF) && r.Context().Err() == nil {
				rt.logger.Warn("upstream stream broke", zap.Error(err))
				(&openai.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "upstream_stream_error",
					Message: "the model's stream broke off: " + err.Error()}).WriteEvent(w)
			}
			return
		}
		if br.Buffered() == 0 {
			_ = flusher.Flush()
		}
	}
}

// streamState is what stream learns from the events it forwards.
type streamState struct {
	events   int64 // data events forwarded, about one token each
	first    time.Time
	last     time.Time
	sawUsage bool
	sawDone  bool
	native   bool         // events in the client's API, forwarded as they are
	usage    openai.Usage // a native stream's usage so far
	log      *openai.LogFields
}

func (rt *Router) forwardEvent(w http.ResponseWriter, r *http.Request, req *openai.Request, event []byte, st *streamState) bool {
	if st.native {
		rt.nativeEvent(r, event, st)
	} else if bytes.HasPrefix(event, dataPrefix) {
		if bytes.Contains(event, usageKey) {
			if u, ok := openai.FindUsage(event); ok {
				setUsage(r, u)
				st.sawUsage = true
				if !req.IncludeUsage && openai.IsUsageOnlyChunk(event) {
					return true
				}
			}
		}
		if bytes.HasPrefix(event, doneEvent) {
			st.sawDone = true
		} else {
			st.events++
			st.last = time.Now()
			if st.first.IsZero() {
				st.first = st.last
			}
		}
	}
	st.log.KeepResponse(event)
	_, err := w.Write(event)
	return err == nil
}

var (
	doneEvent = []byte("data: [DONE]")
	doneLine  = []byte("data: [DONE]\n\n")
)

// nativeEvent reads usage from an event in the client's API (Messages'
// message_start and message_delta, Responses' response.completed) and
// counts the events that carry output.
func (rt *Router) nativeEvent(r *http.Request, event []byte, st *streamState) {
	if bytes.Contains(event, usageKey) {
		if u, ok := openai.NativeUsage(event, st.usage); ok {
			st.usage = u
			setUsage(r, u)
			st.sawUsage = true
		}
	}
	if bytes.Contains(event, deltaKey) {
		st.events++
		st.last = time.Now()
		if st.first.IsZero() {
			st.first = st.last
		}
	}
}

var deltaKey = []byte(`delta"`)

// settleCut records usage for a stream that ended without a usage chunk
// (cut short by the client or the upstream): the prompt estimate and one
// token per forwarded event.
func settleCut(r *http.Request, req *openai.Request, st *streamState) {
	if st.sawUsage {
		return
	}
	p := req.PromptTokensEstimate()
	setUsage(r, openai.Usage{PromptTokens: p, CompletionTokens: st.events, TotalTokens: p + st.events, Estimated: true})
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

func setVars(r *http.Request, rep *fleet.Replica, engine string) {
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.llm.replica", rep.ID)
	}
	lf := openai.Log(r)
	lf.Model, lf.Replica, lf.Engine, lf.ReplicaNode = rep.Model, rep.ID, engine, rep.Node
}

func setUsage(r *http.Request, u openai.Usage) {
	openai.SetUsage(r, u)
	if repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); ok {
		repl.Set("http.llm.usage.prompt_tokens", u.PromptTokens)
		repl.Set("http.llm.usage.completion_tokens", u.CompletionTokens)
		repl.Set("http.llm.usage.total_tokens", u.TotalTokens)
	}
	lf := openai.Log(r)
	lf.PromptTokens, lf.CompletionTokens, lf.HasUsage, lf.CachedTokens = u.PromptTokens, u.CompletionTokens, true, u.CachedTokens
}

type upstreamError struct {
	replica string
	err     error
}

func (e *upstreamError) Error() string {
	if e.replica == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("replica %s: %v", e.replica, e.err)
}

func (e *upstreamError) Unwrap() error { return e.err }
