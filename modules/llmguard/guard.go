// Package llmguard is the llm_guardrails HTTP handler: checks on the
// prompt and the answer (regular expressions, PII and secrets, a guard
// model, an outside service), PII redaction with the values put back in
// the answer, and all of it on streams without buffering them.
package llmguard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/mcpwire"
	"github.com/llmgw/llmgw/modules/openai"
	_ "github.com/llmgw/llmgw/modules/openai/messagesapi"  // Enter translates Messages requests
	_ "github.com/llmgw/llmgw/modules/openai/responsesapi" // and Responses requests
)

func init() {
	caddy.RegisterModule(Guardrails{})
}

// Guardrails runs checks on the prompt before the model sees it and on
// the answer before the client does.
//
// Input findings block the request (400, naming the check), are redacted
// (typed placeholders such as <EMAIL_1>; the model sees only those, and
// the client gets the original values back in the answer, also when a
// placeholder is split across stream chunks), or are logged. Output
// findings cut the answer (an SSE error event, or a refusal), are masked
// ([EMAIL]), or are logged. Streams stay streams: only a possible
// placeholder's prefix is held back, never the answer.
//
// Jobs (llm_jobs after it) are checked too: the input checks read the
// prompt of POST /v1/images/generations and /v1/images/edits, and the
// text inputs of the workflow of POST /v1/jobs (string inputs other than
// file, model and setting names) or its named workflow's string
// parameters; a blocked job gets the same 400 and is never queued, a
// redacted value is replaced where it was.
//
// Each request records every check's outcome (passed, redacted, blocked,
// flagged, skipped with the reason, errored) in the access log field
// llm_guard (also the request variable llm.guard) and in metrics;
// Server-Timing carries guard.
type Guardrails struct {
	// Checks, each a module in http.llm_guardrails.checks (pii, regex,
	// judge, webhook), run in order.
	ChecksRaw []json.RawMessage `json:"checks,omitempty" caddy:"namespace=http.llm_guardrails.checks inline_key=check"`
	// OutputBlock is how a blocked answer ends: error (an SSE error event,
	// or a 400 for a whole answer) or refusal (the refusal text with
	// finish_reason content_filter). Default: error.
	OutputBlock string `json:"output_block,omitempty"`
	// Refusal is the text a refused answer gets. Default: "I can't help
	// with that."
	Refusal string `json:"refusal,omitempty"`
	// Window is how many bytes of recent answer text output checks see
	// again with each stream chunk, to find matches across chunks.
	// Default: 128.
	Window int `json:"window,omitempty"`
	// Lookahead is how many bytes of a stream's text output checks hold
	// back, so that a match up to that long never reaches the client, not
	// even in part. It delays the text by as much. Default: 0 (a match
	// that spans chunks is cut where it completes, and nothing after it
	// is sent).
	Lookahead int `json:"lookahead,omitempty"`

	checks      []Check
	app         *llm.App
	logger      *zap.Logger
	lastSummary *atomic.Pointer[resultSummary] // see summaryOf
}

// CaddyModule returns the Caddy module information.
func (Guardrails) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.llm_guardrails", New: func() caddy.Module { return new(Guardrails) }}
}

// Provision loads the checks.
func (g *Guardrails) Provision(ctx caddy.Context) error {
	g.logger = ctx.Logger()
	g.lastSummary = new(atomic.Pointer[resultSummary])
	if a, err := ctx.App("llm"); err == nil {
		g.app = a.(*llm.App)
	}
	mods, err := ctx.LoadModule(g, "ChecksRaw")
	if err != nil {
		return fmt.Errorf("llm_guardrails: %w", err)
	}
	names := map[string]bool{}
	for _, m := range mods.([]any) {
		c, ok := m.(Check)
		if !ok {
			return fmt.Errorf("llm_guardrails: module %T is not a check", m)
		}
		name := c.CheckScope().Name
		if names[name] {
			return fmt.Errorf("llm_guardrails: two checks are named %q; give one a name", name)
		}
		names[name] = true
		g.checks = append(g.checks, c)
	}
	if len(g.checks) == 0 {
		return fmt.Errorf("llm_guardrails: no checks; add at least one (pii, regex, judge, webhook)")
	}
	switch g.OutputBlock {
	case "":
		g.OutputBlock = "error"
	case "error", "refusal":
	default:
		return fmt.Errorf("llm_guardrails: output_block %q: use error or refusal", g.OutputBlock)
	}
	if g.Refusal == "" {
		g.Refusal = "I can't help with that."
	}
	if g.Window <= 0 {
		g.Window = 128
	}
	return registerMetrics(ctx.GetMetricsRegistry())
}

// result is one check's outcome on one stage of a request.
type result struct {
	sc      *Scope // the check's
	stage   Stage
	outcome string
	reason  string
}

// severity orders outcomes: a check's outcome on a stage is its worst.
func severity(o string) int {
	switch o {
	case Blocked:
		return 5
	case Errored:
		return 4
	case Redacted:
		return 3
	case Flagged:
		return 2
	case Passed:
		return 1
	}
	return 0
}

// state is one request's guardrail state.
type state struct {
	g       *Guardrails
	model   string
	results []result
	vault   vault
	prompt  []string // input texts, for output checks that judge the exchange

	// Room for a request's usual results and checks, without allocating.
	resultBuf     [4]result
	inBuf, outBuf [4]Check
}

// newState is a request's state, its results in the room it has for them.
func newState(g *Guardrails, model string) *state {
	st := &state{g: g, model: model}
	st.results = st.resultBuf[:0]
	return st
}

func (s *state) record(sc *Scope, stage Stage, outcome, reason string) {
	for i := range s.results {
		r := &s.results[i]
		if r.sc == sc && r.stage == stage {
			if severity(outcome) > severity(r.outcome) {
				r.outcome, r.reason = outcome, reason
			}
			return
		}
	}
	s.results = append(s.results, result{sc, stage, outcome, reason})
}

// ServeHTTP checks the prompt, then the answer on its way out.
func (g *Guardrails) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	w, tracked := openai.Track(w, r)
	if tracked != nil {
		defer g.app.RecordRequest(tracked)
	}
	w, req, err := openai.Enter(w, r)
	if errors.Is(err, openai.ErrNotGenerating) {
		if field := jobEndpoint(r); field != "" {
			return g.serveJob(w, r, next, field) // jobs.go
		}
		if body, err := mcpwire.Read(r); err == nil && body.ToolCalls() > 0 {
			return g.serveMCP(w, r, next, body)
		}
		return next.ServeHTTP(w, r)
	}
	if err != nil {
		return next.ServeHTTP(w, r) // the router answers with the error
	}
	start := time.Now()
	ctx, span, traced := openai.StartSpan(r.Context(), "llm.guard")
	st := newState(g, req.Model)
	if g.app != nil {
		if m, err := g.app.Lookup(req.Model); err == nil {
			st.model = m.Name
		}
	}
	tenant, _ := tenancy.TenantOf(r)
	in, out := g.plan(st, tenant, req)
	var blocked *openai.Error
	if len(in) > 0 {
		blocked = g.input(ctx, st, req, in)
	}
	took := time.Since(start)
	if traced {
		span.SetAttributes(attribute.String("llm.guard.input", summary(st.results)))
		span.End()
	}
	observeDuration(Input, took.Seconds())
	if blocked != nil {
		st.finish(r)
		metricRefused.WithLabelValues(st.model, strconv.Itoa(blocked.Status)).Inc()
		w.Header().Add("Server-Timing", timing("guard", took))
		blocked.Write(w)
		return nil
	}
	w.Header().Add("Server-Timing", timing("guard", took))
	st.seedFromTools(r)
	if len(out) == 0 && st.vault.empty() {
		err := next.ServeHTTP(w, r)
		st.finish(r)
		return err
	}
	req.Watched = true
	ow := newOutputWriter(w, st, req, out)
	ow.ctx = ctx
	err = next.ServeHTTP(ow, r)
	ow.finish()
	st.finish(r)
	return err
}

// plan picks the checks that run on each stage, recording those skipped.
func (g *Guardrails) plan(st *state, t *tenancy.Tenant, req *openai.Request) (in, out []Check) {
	in, out = st.inBuf[:0], st.outBuf[:0]
	for _, c := range g.checks {
		sc := c.CheckScope()
		ok, why := sc.applies(st.model, t)
		for _, stage := range []Stage{Input, Output} {
			if !sc.runsOn(stage) {
				continue
			}
			switch {
			case !ok:
				st.record(sc, stage, Skipped, why)
			case stage == Output && req.Endpoint == openai.Embeddings:
				st.record(sc, stage, Skipped, "embeddings have no text output")
			case stage == Output && req.Stream && !incremental(c):
				st.record(sc, stage, Skipped, "it needs the whole answer and this one is streamed")
			case stage == Input:
				in = append(in, c)
			default:
				out = append(out, c)
			}
		}
	}
	return in, out
}

func incremental(c Check) bool {
	i, ok := c.(Incremental)
	return ok && i.Incremental()
}

// inputField is where an endpoint's text is and how it is named.
func inputField(req *openai.Request) (string, []byte, uint8) {
	switch req.Endpoint {
	case openai.ChatCompletions:
		return "messages", req.Messages, fieldNone
	case openai.Completions:
		return "prompt", req.Prompt, fieldPrompt
	}
	return "input", req.Input, fieldInput
}

// input runs the input checks, blocking or redacting. It returns the
// error to answer with when the prompt is blocked.
func (g *Guardrails) input(ctx context.Context, st *state, req *openai.Request, checks []Check) *openai.Error {
	name, raw, root := inputField(req)
	d := docs.Get().(*doc)
	defer func() {
		if d.b = nil; cap(d.spans) <= 1024 && cap(d.frames) <= 1024 { // a large prompt's are not kept
			docs.Put(d)
		}
	}()
	if err := d.parse(raw, root); err != nil {
		return nil // the router reports malformed requests
	}
	texts := make([]string, len(d.spans))
	for i, s := range d.spans {
		texts[i] = d.text(s)
	}
	st.prompt = texts
	blocked, redact := g.inspectInput(ctx, st, texts, checks, name)
	if blocked != nil || len(redact) == 0 {
		return blocked
	}
	var edits []edit
	st.vault.redact(texts, resolve(redact), func(ti int, text string) {
		edits = append(edits, edit{span: ti, text: text})
	})
	body := d.splice(make([]byte, 0, len(raw)+64), edits)
	if err := req.Set(name, body); err != nil {
		g.logger.Error("redacting the prompt", zap.Error(err))
		return &openai.Error{Status: http.StatusInternalServerError, Type: "server_error", Code: "guardrail_error",
			Message: "redacting the prompt failed: " + err.Error()}
	}
	return nil
}

// inspectInput runs the input checks on texts: the error that blocks the
// request (param names where its text was), else the findings to redact.
func (g *Guardrails) inspectInput(ctx context.Context, st *state, texts []string, checks []Check, name string) (*openai.Error, []Finding) {
	insp := &Inspection{Stage: Input, Model: st.model, Texts: texts}
	var redact []Finding
	for _, c := range checks {
		sc := c.CheckScope()
		fs, err := inspect(ctx, c, insp)
		if err != nil {
			if e := st.failed(sc, Input, err); e != nil {
				return e, nil
			}
			continue
		}
		outcome, first := Passed, (*Finding)(nil)
		for i := range fs {
			f := &fs[i]
			countFinding(sc.Name, f.Kind, f.Action)
			switch f.Action {
			case Block:
				if first == nil || first.Action != Block {
					first = f
				}
				outcome = Blocked
			case Redact:
				redact = append(redact, *f)
				outcome = worse(outcome, Redacted)
			case Log:
				outcome = worse(outcome, Flagged)
				if first == nil {
					first = f
				}
				g.logger.Info("guardrail finding", zap.String("check", sc.Name), zap.String("stage", "input"), zap.String("kind", f.Kind))
			}
		}
		st.record(sc, Input, outcome, "")
		if outcome == Blocked {
			return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "guardrail_blocked",
				Param: name, Message: fmt.Sprintf("the prompt was blocked by guardrail %q: %s; remove it and try again", sc.Name, describe(first))}, nil
		}
	}
	return nil, redact
}

// docs keep the memory of prompts' parsed texts for later requests.
var docs = sync.Pool{New: func() any { return new(doc) }}

// inspect runs one check with its timeout.
func inspect(ctx context.Context, c Check, in *Inspection) ([]Finding, error) {
	if _, ok := c.(Incremental); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(c.CheckScope().Timeout))
		defer cancel()
	}
	return c.Inspect(ctx, in)
}

// failed records a check that could not run; with on_error deny it
// returns the error that blocks the request.
func (st *state) failed(sc *Scope, stage Stage, err error) *openai.Error {
	st.g.logger.Warn("guardrail check failed", zap.String("check", sc.Name), zap.String("stage", string(stage)),
		zap.String("on_error", sc.OnError), zap.Error(err))
	st.record(sc, stage, Errored, err.Error())
	if sc.OnError == "allow" {
		return nil
	}
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "guardrail_unavailable",
		RetryAfter: time.Second,
		Message:    fmt.Sprintf("guardrail %q could not check the %s (%v) and its on_error is deny; try again later", sc.Name, what(stage), err)}
}

func what(s Stage) string {
	if s == Input {
		return "prompt"
	}
	return "answer"
}

func worse(a, b string) string {
	if severity(b) > severity(a) {
		return b
	}
	return a
}

// describe says what a finding was, without its value.
func describe(f *Finding) string {
	if f == nil {
		return "a match"
	}
	d := kindNames[f.Kind]
	if d == "" {
		d = "a match for " + f.Kind
	}
	if f.Detail != "" {
		d += " (" + f.Detail + ")"
	}
	return d
}

var kindNames = map[string]string{
	KindEmail: "an email address", KindPhone: "a phone number", KindCard: "a payment card number",
	KindIBAN: "a bank account number (IBAN)", KindNationalID: "a national id number", KindIP: "an IP address",
	KindSecret: "a secret (a key, token or private key)",
}

// finish records the outcomes in the access log and metrics.
func (st *state) finish(r *http.Request) {
	for _, res := range st.results {
		res.sc.metrics.count(res.sc.Name, res.stage, res.outcome)
	}
	if len(st.results) == 0 {
		return
	}
	sum := st.g.summaryOf(st.results)
	caddyhttp.SetVar(r.Context(), "llm.guard", sum)
	openai.Log(r).Guard = sum
}

// summary is the results as "pii/input:redacted regex/output:passed
// judge/output:skipped(it needs the whole answer …)".
func summary(rs []result) string {
	n := 0
	for _, r := range rs {
		n += len(r.sc.Name) + len(r.stage) + len(r.outcome) + len(r.reason) + 5
	}
	var b strings.Builder
	b.Grow(n) // one allocation
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.sc.Name)
		b.WriteByte('/')
		b.WriteString(string(r.stage))
		b.WriteByte(':')
		b.WriteString(r.outcome)
		if r.reason != "" && (r.outcome == Skipped || r.outcome == Errored) {
			b.WriteByte('(')
			b.WriteString(r.reason)
			b.WriteByte(')')
		}
	}
	return b.String()
}

// summaryOf is summary(rs), the same string as the last request's when
// the results are the same, as they mostly are: no string is built.
func (g *Guardrails) summaryOf(rs []result) string {
	if g.lastSummary == nil {
		return summary(rs)
	}
	if last := g.lastSummary.Load(); last != nil && slices.Equal(last.results, rs) {
		return last.s
	}
	s := summary(rs)
	g.lastSummary.Store(&resultSummary{slices.Clone(rs), s})
	return s
}

type resultSummary struct {
	results []result
	s       string
}

func timing(name string, d time.Duration) string {
	var b [64]byte
	out := append(append(b[:0], name...), ";dur="...)
	return string(strconv.AppendFloat(out, float64(d.Microseconds())/1000, 'f', 3, 64))
}

// Interface guards.
var (
	_ caddy.Provisioner           = (*Guardrails)(nil)
	_ caddyhttp.MiddlewareHandler = (*Guardrails)(nil)
)
