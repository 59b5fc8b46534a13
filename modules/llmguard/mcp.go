package llmguard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/mcpwire"
	"github.com/llmgw/llmgw/modules/openai"
)

// MCP tool calls (tools/call POSTed to llm_mcp) are guarded on both sides:
//
//   - Arguments: placeholders a redacted tool result gave the model
//     (<EMAIL_T1>) get their values back, so the tool works on the real
//     data; then the checks look at every string of the arguments. A
//     block finding refuses the call (a JSON-RPC error naming the
//     guardrail); log findings are recorded. Redact findings are not
//     applied: the arguments go to the company's own tool, not to a model.
//   - Results: the checks look at the text content and the strings of the
//     structured content. Redact findings become placeholders kept for the
//     key (an hour after their last use), so the model never sees the
//     value, a later tool call gets it back, and a chat answer through
//     llm_guardrails that repeats the placeholder gives the client the
//     value. A block finding replaces the result with a tool error.
//
// Every check that applies to the caller runs on both (tool results are
// where prompt injections come from); checks limited to models do not run
// on tool calls, which have none.

// toolVault is one key's placeholders from tool results.
type toolVault struct {
	mu   sync.Mutex
	v    vault
	used time.Time
}

const (
	toolVaultIdle = time.Hour
	// toolVaultMax bounds the values one key's vault holds; past it the
	// vault starts again (older placeholders are then not restored).
	toolVaultMax = 10000
)

var toolVaults struct {
	sync.Mutex
	m     map[string]*toolVault
	swept time.Time
	n     atomic.Int64 // len(m), read without the lock
}

// vaultFor returns scope's tool vault, making it when create is set.
func vaultFor(scope string, create bool) *toolVault {
	now := time.Now()
	toolVaults.Lock()
	defer toolVaults.Unlock()
	if toolVaults.m == nil {
		toolVaults.m = map[string]*toolVault{}
	}
	if now.Sub(toolVaults.swept) > time.Minute {
		toolVaults.swept = now
		for k, tv := range toolVaults.m {
			tv.mu.Lock()
			idle := now.Sub(tv.used) > toolVaultIdle
			tv.mu.Unlock()
			if idle {
				delete(toolVaults.m, k)
				toolVaults.n.Add(-1)
			}
		}
	}
	tv := toolVaults.m[scope]
	if tv == nil && create {
		tv = &toolVault{v: vault{tag: "T"}}
		toolVaults.m[scope] = tv
		toolVaults.n.Add(1)
	}
	if tv != nil {
		tv.mu.Lock()
		tv.used = now
		tv.mu.Unlock()
	}
	return tv
}

// seedFromTools lets a chat answer restore the placeholders the key's
// tool results were given. The request's scope is looked up only when
// some tool result was given placeholders.
func (st *state) seedFromTools(r *http.Request) {
	if toolVaults.n.Load() == 0 {
		return
	}
	tv := vaultFor(openai.Scope(r), false)
	if tv == nil {
		return
	}
	tv.mu.Lock()
	defer tv.mu.Unlock()
	for p, val := range tv.v.values {
		if st.vault.values == nil {
			st.vault.byValue, st.vault.values, st.vault.counts = map[string]string{}, map[string]string{}, map[string]int{}
		}
		st.vault.values[p] = val
		st.vault.maxLen = max(st.vault.maxLen, len(p))
	}
}

// serveMCP guards the tool calls of an MCP POST.
func (g *Guardrails) serveMCP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler, body *mcpwire.Body) error {
	tenant, _ := tenancy.TenantOf(r)
	scope := openai.Scope(r)
	st := newState(g, "")
	var checks []Check
	for _, c := range g.checks {
		sc := c.CheckScope()
		if ok, why := sc.applies("", tenant); !ok {
			st.record(sc, Input, Skipped, why)
			continue
		}
		checks = append(checks, c)
	}
	ids := map[string]string{} // tool calls' ids → tool names
	changed := false
	for i := range body.Messages {
		m := &body.Messages[i]
		if !m.IsToolCall() {
			continue
		}
		var params map[string]json.RawMessage
		if json.Unmarshal(m.Params, &params) != nil {
			continue // llm_mcp answers the malformed call
		}
		var name string
		_ = json.Unmarshal(params["name"], &name)
		ids[string(compactJSON(m.ID))] = name
		args, restored := g.restoreArgs(scope, params["arguments"])
		if refusal := g.checkArgs(r.Context(), st, checks, args); refusal != "" {
			st.finish(r)
			writeToolRefusal(w, body, m.ID, fmt.Sprintf("the call of tool %q was blocked by %s; change its arguments and try again", name, refusal))
			return nil
		}
		if restored {
			params["arguments"] = args
			m.Params, _ = marshal(params)
			changed = true
		}
	}
	if len(ids) == 0 {
		return next.ServeHTTP(w, r)
	}
	if changed {
		if err := body.Encode(r); err != nil {
			return err
		}
	}
	mw := &mcpWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
		g: g, st: st, checks: checks, ids: ids, scope: scope, ctx: r.Context()}
	err := next.ServeHTTP(mw, r)
	mw.finish()
	st.finish(r)
	return err
}

// restoreArgs puts the key's placeholders' values back in the arguments'
// strings.
func (g *Guardrails) restoreArgs(scope string, args json.RawMessage) (json.RawMessage, bool) {
	if len(args) == 0 || !bytes.Contains(args, []byte("<")) {
		return args, false
	}
	tv := vaultFor(scope, false)
	if tv == nil {
		return args, false
	}
	var v any
	if decodeJSON(args, &v) != nil {
		return args, false
	}
	changed := false
	tv.mu.Lock()
	v = mapStrings(v, func(s string) string {
		out, _ := tv.v.restore(s, true)
		if out != s {
			changed = true
		}
		return out
	})
	tv.mu.Unlock()
	if !changed {
		return args, false
	}
	out, err := marshal(v)
	if err != nil {
		return args, false
	}
	return out, true
}

// checkArgs runs the checks on the arguments' strings; it returns what
// blocked the call ("guardrail \"x\": an email address"), or "".
func (g *Guardrails) checkArgs(ctx context.Context, st *state, checks []Check, args json.RawMessage) string {
	if len(checks) == 0 || len(args) == 0 {
		return ""
	}
	var v any
	if decodeJSON(args, &v) != nil {
		return ""
	}
	var texts []string
	mapStrings(v, func(s string) string { texts = append(texts, s); return s })
	if len(texts) == 0 {
		return ""
	}
	insp := &Inspection{Stage: Input, Texts: texts}
	for _, c := range checks {
		sc := c.CheckScope()
		fs, err := inspect(ctx, c, insp)
		if err != nil {
			if e := st.failed(sc, Input, err); e != nil {
				return fmt.Sprintf("guardrail %q, which could not run (%v)", sc.Name, err)
			}
			continue
		}
		outcome := Passed
		for i := range fs {
			f := &fs[i]
			countFinding(sc.Name, f.Kind, f.Action)
			switch f.Action {
			case Block:
				st.record(sc, Input, Blocked, "")
				return fmt.Sprintf("guardrail %q: %s", sc.Name, describe(f))
			case Log:
				outcome = worse(outcome, Flagged)
				g.logger.Info("guardrail finding", zap.String("check", sc.Name), zap.String("stage", "tool arguments"), zap.String("kind", f.Kind))
			}
		}
		st.record(sc, Input, outcome, "")
	}
	return ""
}

// mcpWriter checks the results of the guarded tool calls in llm_mcp's
// answer: a JSON body (held until complete) or SSE events (each message
// held until its event is complete; progress notifications pass as they
// come).
type mcpWriter struct {
	caddyhttp.ResponseWriterWrapper
	g      *Guardrails
	st     *state
	checks []Check
	ids    map[string]string
	scope  string
	ctx    context.Context

	mode   int // 0 undecided, 1 pass, 2 whole JSON, 3 SSE
	status int
	buf    []byte
}

func (w *mcpWriter) WriteHeader(status int) {
	if w.mode != 0 {
		return
	}
	ct := w.Header().Get("Content-Type")
	switch {
	case status < 200 || status >= 300:
		w.mode = 1
	case strings.HasPrefix(ct, "text/event-stream"):
		w.mode = 3
		w.Header().Del("Content-Length")
	case strings.HasPrefix(ct, "application/json"):
		w.mode, w.status = 2, status
		w.Header().Del("Content-Length")
		return // sent with the checked body
	default:
		w.mode = 1
	}
	w.ResponseWriterWrapper.WriteHeader(status)
}

func (w *mcpWriter) Write(b []byte) (int, error) {
	if w.mode == 0 {
		w.WriteHeader(http.StatusOK)
	}
	switch w.mode {
	case 2:
		w.buf = append(w.buf, b...)
		return len(b), nil
	case 3:
		w.buf = append(w.buf, b...)
		return len(b), w.events(false)
	}
	return w.ResponseWriterWrapper.Write(b)
}

// Flush sends the SSE events complete so far.
func (w *mcpWriter) Flush() {
	if w.mode == 3 {
		_ = w.events(false)
	}
	if w.mode != 2 {
		_ = http.NewResponseController(w.ResponseWriterWrapper.ResponseWriter).Flush()
	}
}

// Unwrap is nil: flushing goes through Flush, which sends what is checked.
func (w *mcpWriter) Unwrap() http.ResponseWriter { return nil }

// ReadFrom goes through Write (the embedded wrapper's would not).
func (w *mcpWriter) ReadFrom(r io.Reader) (int64, error) { return io.Copy(writerFunc(w.Write), r) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// events writes the complete SSE events in buf, their tool results
// checked; with final, the rest too.
func (w *mcpWriter) events(final bool) error {
	var out []byte
	for {
		i := bytes.Index(w.buf, []byte("\n\n"))
		if i < 0 {
			break
		}
		out = w.event(out, w.buf[:i])
		out = append(out, "\n\n"...)
		w.buf = w.buf[i+2:]
	}
	if final && len(w.buf) > 0 {
		out = w.event(out, w.buf)
		w.buf = w.buf[:0]
	}
	if len(out) == 0 {
		return nil
	}
	_, err := w.ResponseWriterWrapper.Write(out)
	return err
}

// event appends one SSE event, its data checked when it is a tool result.
func (w *mcpWriter) event(out, ev []byte) []byte {
	lines := bytes.Split(ev, []byte("\n"))
	var data []byte
	n := 0
	for _, l := range lines {
		if d, ok := bytes.CutPrefix(l, []byte("data:")); ok {
			data = append(append(data, bytes.TrimPrefix(d, []byte(" "))...), '\n')
			n++
		}
	}
	if n == 0 {
		return append(out, ev...)
	}
	data = data[:len(data)-1]
	checked, changed := w.message(data)
	if !changed {
		return append(out, ev...)
	}
	for _, l := range lines {
		if !bytes.HasPrefix(l, []byte("data:")) {
			out = append(append(out, l...), '\n')
		}
	}
	out = append(append(out, "data: "...), checked...)
	return out
}

func (w *mcpWriter) finish() {
	switch w.mode {
	case 2:
		out := w.buf
		if checked, changed := w.body(w.buf); changed {
			out = checked
		}
		w.ResponseWriterWrapper.WriteHeader(w.status)
		_, _ = w.ResponseWriterWrapper.Write(out)
	case 3:
		_ = w.events(true)
	}
}

// body checks a JSON body: one message or a batch.
func (w *mcpWriter) body(b []byte) ([]byte, bool) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '[' {
		return w.message(b)
	}
	var msgs []json.RawMessage
	if json.Unmarshal(t, &msgs) != nil {
		return b, false
	}
	changed := false
	for i, m := range msgs {
		if c, ok := w.message(m); ok {
			msgs[i], changed = c, true
		}
	}
	if !changed {
		return b, false
	}
	out, err := marshal(msgs)
	return out, err == nil
}

// message checks one JSON-RPC message when it answers a guarded call.
func (w *mcpWriter) message(b []byte) ([]byte, bool) {
	if !bytes.Contains(b, []byte(`"result"`)) {
		return b, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b, false
	}
	tool, ok := w.ids[string(compactJSON(m["id"]))]
	if !ok || len(m["result"]) == 0 {
		return b, false
	}
	res, changed := w.result(tool, m["result"])
	if !changed {
		return b, false
	}
	m["result"] = res
	out, err := marshal(m)
	if err != nil {
		return b, false
	}
	return out, true
}

// result checks a CallToolResult's texts.
func (w *mcpWriter) result(tool string, raw json.RawMessage) (json.RawMessage, bool) {
	var res map[string]any
	if decodeJSON(raw, &res) != nil {
		return raw, false
	}
	// The texts: text content, then the structured content's strings.
	var texts []string
	collect := func(s string) string { texts = append(texts, s); return s }
	content, _ := res["content"].([]any)
	for _, c := range content {
		if item, ok := c.(map[string]any); ok && item["type"] == "text" {
			if s, ok := item["text"].(string); ok {
				collect(s)
			}
		}
	}
	if sc, ok := res["structuredContent"]; ok {
		mapStrings(sc, collect)
	}
	if len(texts) == 0 || len(w.checks) == 0 {
		return raw, false
	}
	insp := &Inspection{Stage: Output, Texts: texts}
	var redact []Finding
	for _, c := range w.checks {
		sc := c.CheckScope()
		fs, err := inspect(w.ctx, c, insp)
		if err != nil {
			if e := w.st.failed(sc, Output, err); e != nil {
				return toolErrorResult(fmt.Sprintf("the result of tool %q could not be checked by guardrail %q (%v)", tool, sc.Name, err)), true
			}
			continue
		}
		outcome := Passed
		for i := range fs {
			f := &fs[i]
			countFinding(sc.Name, f.Kind, f.Action)
			switch f.Action {
			case Block:
				w.st.record(sc, Output, Blocked, "")
				return toolErrorResult(fmt.Sprintf("the result of tool %q was blocked by guardrail %q: %s", tool, sc.Name, describe(f))), true
			case Redact:
				redact = append(redact, *f)
				outcome = worse(outcome, Redacted)
			case Log:
				outcome = worse(outcome, Flagged)
				w.g.logger.Info("guardrail finding", zap.String("check", sc.Name), zap.String("stage", "tool result"), zap.String("kind", f.Kind))
			}
		}
		w.st.record(sc, Output, outcome, "")
	}
	if len(redact) == 0 {
		return raw, false
	}
	redact = resolve(redact)
	tv := vaultFor(w.scope, true)
	tv.mu.Lock()
	if len(tv.v.values) > toolVaultMax {
		tv.v = vault{tag: "T"}
	}
	newTexts := slices.Clone(texts)
	tv.v.redact(texts, redact, func(ti int, text string) { newTexts[ti] = text })
	tv.mu.Unlock()
	// Put the texts back in the order they were collected.
	k := 0
	next := func(string) string { s := newTexts[k]; k++; return s }
	for _, c := range content {
		if item, ok := c.(map[string]any); ok && item["type"] == "text" {
			if _, ok := item["text"].(string); ok {
				item["text"] = next("")
			}
		}
	}
	if sc, ok := res["structuredContent"]; ok {
		res["structuredContent"] = mapStrings(sc, next)
	}
	out, err := marshal(res)
	if err != nil {
		return raw, false
	}
	return out, true
}

func toolErrorResult(msg string) json.RawMessage {
	out, _ := marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": msg}}, "isError": true})
	return out
}

// writeToolRefusal answers a body whose call was refused: that call gets
// a JSON-RPC error, and so do the other requests of the body, which are
// not sent.
func writeToolRefusal(w http.ResponseWriter, body *mcpwire.Body, id json.RawMessage, msg string) {
	body.WriteErrors(w, rpcBlockedCode, func(other json.RawMessage) string {
		if bytes.Equal(compactJSON(other), compactJSON(id)) {
			return msg
		}
		return "not sent: another call of the same request was blocked by a guardrail"
	}, nil)
}

// rpcBlockedCode is the JSON-RPC error code of a call a guardrail refused
// (in the range JSON-RPC leaves to servers).
const rpcBlockedCode = -32030

func compactJSON(b []byte) []byte {
	if bytes.IndexAny(b, " \t\r\n") < 0 {
		return b
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

func decodeJSON(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return d.Decode(v)
}

// mapStrings returns v with fn applied to every string value (not keys),
// in a fixed order: arrays in order, objects by sorted key.
func mapStrings(v any, fn func(string) string) any {
	switch x := v.(type) {
	case string:
		return fn(x)
	case []any:
		for i := range x {
			x[i] = mapStrings(x[i], fn)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			x[k] = mapStrings(x[k], fn)
		}
	}
	return v
}

// marshal is json.Marshal without HTML escaping: the placeholders' angle
// brackets stay as they are, as do the tool's own characters.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
