package llmguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/openai"
)

// errBlocked stops the writer's caller (the router) once an answer is cut.
var errBlocked = errors.New("the answer was blocked by a guardrail")

// maxEventBytes bounds one SSE event held while it arrives.
const maxEventBytes = 4 << 20

const (
	modeUndecided = iota
	modePass      // errors and anything not an answer: as they come
	modeWhole     // a JSON answer: checked and restored when complete
	modeSSE       // a stream: event by event
)

// outputWriter checks and restores the answer on its way to the client.
type outputWriter struct {
	*caddyhttp.ResponseWriterWrapper
	st     *state
	req    *openai.Request
	checks []Check
	ctx    context.Context // the request's: a check that calls out stops when the client leaves

	mode     int
	status   int
	buf      []byte // whole: the answer; SSE: an event arriving
	out      []byte // SSE: what one Write sends on
	streams  map[uint64]*streamText
	meta     *chunkMeta
	blocked  bool
	took     time.Duration
	d        doc
	seen     []uint64 // the stream keys of the event at hand
	finished []int32  // the choices it finishes
}

// streamText is one text of a stream: a choice's content or text, or a
// tool call's arguments.
type streamText struct {
	choice  int32
	tool    int32
	field   uint8
	pending string // held back, as the model wrote it
	tail    string // recently released model text, for checks across chunks
}

// chunkMeta is what synthetic chunks copy from the stream's own.
type chunkMeta struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint,omitempty"`
}

func newOutputWriter(w http.ResponseWriter, st *state, req *openai.Request, checks []Check) *outputWriter {
	return &outputWriter{ResponseWriterWrapper: &caddyhttp.ResponseWriterWrapper{ResponseWriter: w},
		st: st, req: req, checks: checks, ctx: context.Background()} // ServeHTTP sets the request's
}

func (o *outputWriter) WriteHeader(status int) {
	if o.mode != modeUndecided {
		return
	}
	o.status = status
	ct := o.Header().Get("Content-Type")
	switch {
	case status < 200 || status >= 300:
		o.mode = modePass
	case strings.HasPrefix(ct, "text/event-stream"):
		o.mode = modeSSE
		o.Header().Del("Content-Length")
	case strings.HasPrefix(ct, "application/json"):
		o.mode = modeWhole
		return // sent with the checked answer
	default:
		o.mode = modePass
	}
	o.ResponseWriterWrapper.WriteHeader(status)
}

func (o *outputWriter) Write(b []byte) (int, error) {
	if o.mode == modeUndecided {
		o.WriteHeader(http.StatusOK)
	}
	switch o.mode {
	case modeWhole:
		if len(o.buf)+len(b) > 64<<20 {
			return 0, errors.New("answer too large for output guardrails")
		}
		o.buf = append(o.buf, b...)
		return len(b), nil
	case modeSSE:
		return o.writeSSE(b)
	}
	return o.ResponseWriterWrapper.Write(b)
}

// finish sends what is left: a whole answer, or a stream's held text.
func (o *outputWriter) finish() {
	start := time.Now()
	switch o.mode {
	case modeWhole:
		o.whole()
	case modeSSE:
		if !o.blocked {
			out := o.flushAll(o.out[:0])
			if len(out) > 0 {
				_, _ = o.ResponseWriterWrapper.Write(out)
			}
		}
	}
	o.took += time.Since(start)
	observeDuration(Output, o.took.Seconds())
	if o.mode == modePass || o.mode == modeUndecided {
		for _, c := range o.checks {
			o.st.record(c.CheckScope(), Output, Skipped, "no answer to check (status "+strconv.Itoa(o.status)+")")
		}
		return
	}
	if o.mode != modeSSE || o.blocked {
		return
	}
	for _, c := range o.checks {
		o.st.record(c.CheckScope(), Output, Passed, "")
	}
}

// --- streams ---

func (o *outputWriter) writeSSE(b []byte) (int, error) {
	if o.blocked {
		return 0, errBlocked
	}
	start := time.Now()
	o.buf = append(o.buf, b...)
	out := o.out[:0]
	for {
		end := eventEnd(o.buf)
		if end < 0 {
			break
		}
		out = o.event(out, o.buf[:end])
		o.buf = o.buf[end:]
		if o.blocked {
			break
		}
	}
	if len(o.buf) == 0 {
		o.buf = o.buf[:0:cap(o.buf)]
	} else if cap(o.buf) > 0 && len(o.buf) < cap(o.buf)/2 {
		o.buf = append(o.buf[:0:0], o.buf...)
	}
	if len(o.buf) > maxEventBytes {
		o.blocked = true
		out = append(out, "data: "...)
		out = append(out, (&openai.Error{Type: "server_error", Code: "guardrail_error",
			Message: "a stream event was larger than the guardrails allow"}).JSON()...)
		out = append(out, "\n\n"...)
	}
	o.out = out
	o.took += time.Since(start)
	if len(out) > 0 {
		if _, err := o.ResponseWriterWrapper.Write(out); err != nil {
			return 0, err
		}
	}
	if o.blocked {
		_ = http.NewResponseController(o.ResponseWriterWrapper).Flush()
		return len(b), errBlocked
	}
	return len(b), nil
}

// eventEnd returns the length of the first complete event in b (with its
// blank line), or -1.
func eventEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		if i+1 < len(b) && b[i+1] == '\n' {
			return i + 2
		}
		if i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n' {
			return i + 3
		}
	}
	return -1
}

var (
	dataPrefix     = []byte("data:")
	escapedLT      = []byte(`\u003c`)
	escapedLTUpper = []byte(`\u003C`)
)

// holding reports whether any stream holds text back.
func (o *outputWriter) holding() bool {
	for _, ts := range o.streams {
		if ts.pending != "" {
			return true
		}
	}
	return false
}

// event handles one SSE event, appending what the client gets to out.
func (o *outputWriter) event(out, ev []byte) []byte {
	if !bytes.HasPrefix(ev, dataPrefix) {
		return append(out, ev...)
	}
	payload := bytes.TrimSpace(ev[len(dataPrefix):])
	if bytes.Equal(payload, []byte("[DONE]")) || len(payload) == 0 || payload[0] != '{' || bytes.HasPrefix(payload, []byte(`{"error"`)) {
		if out = o.flushAll(out); o.blocked {
			return out
		}
		return append(out, ev...)
	}
	if len(o.checks) == 0 && !o.holding() && bytes.IndexByte(payload, '<') < 0 &&
		!bytes.Contains(payload, escapedLT) && !bytes.Contains(payload, escapedLTUpper) {
		return append(out, ev...) // nothing to restore or check
	}
	d := &o.d
	if d.parse(payload, fieldNone) != nil {
		return append(out, ev...)
	}
	if o.meta == nil {
		o.meta = new(chunkMeta)
		_ = json.Unmarshal(payload, o.meta)
	}
	finished := d.finishedChoices(o.finished[:0])
	o.finished = finished
	var edits []edit
	seen := o.seen[:0]
	for si, sp := range d.spans {
		key := d.streamKey(sp)
		seen = append(seen, key)
		ts := o.streams[key]
		if ts == nil {
			if o.streams == nil {
				o.streams = map[uint64]*streamText{}
			}
			ts = &streamText{choice: d.choiceOf(sp), tool: int32(key>>8&0xffffff) - 1, field: sp.field}
			o.streams[key] = ts
		}
		orig := d.text(sp)
		send, cut := o.advance(ts, orig, slices.Contains(finished, ts.choice))
		if cut != nil {
			return o.cut(out, ts, send, cut)
		}
		if send != orig {
			edits = append(edits, edit{span: si, text: send})
		}
	}
	o.seen = seen
	for _, c := range finished {
		if out = o.flushChoice(out, c, seen); o.blocked {
			return out
		}
	}
	if len(edits) == 0 {
		return append(out, ev...)
	}
	out = append(out, "data: "...)
	out = d.splice(out, edits)
	return append(out, "\n\n"...)
}

// advance adds a chunk's text to a stream and returns what of the
// stream may go to the client now, masked and restored. Held back are the
// lookahead (when output checks run), matches that end within
// detectLookahead bytes of the text so far (they may grow, or what follows
// may change them), and a possible placeholder's start; final releases
// everything. When a check cuts the stream it returns the
// finding, and send is the text before the match.
func (o *outputWriter) advance(ts *streamText, text string, final bool) (send string, cut *Finding) {
	cand := text
	if ts.pending != "" {
		cand = ts.pending + text
	}
	rel := len(cand)
	var masks []Finding
	if len(o.checks) > 0 && cand != "" {
		if !final {
			rel = max(0, len(cand)-o.st.g.Lookahead)
		}
		base := len(ts.tail)
		window := ts.tail + cand
		insp := &Inspection{Stage: Output, Model: o.st.model, Texts: []string{window}, Prompt: o.st.prompt}
		for _, c := range o.checks {
			sc := c.CheckScope()
			fs, err := c.Inspect(o.ctx, insp)
			if err != nil {
				if e := o.st.failed(sc, Output, err); e != nil {
					ts.pending = ""
					return "", o.named(sc, &Finding{Text: -1, Detail: e.Message})
				}
				continue
			}
			for i := range fs {
				f := fs[i]
				if f.End <= base {
					continue // released already
				}
				f.Start, f.End = max(f.Start, base)-base, f.End-base
				if f.Action == Block {
					countFinding(sc.Name, f.Kind, f.Action)
					ts.pending = ""
					return o.releaseMasked(ts, cand[:f.Start], within(masks, f.Start), true), o.named(sc, &f)
				}
				if !final && f.End > len(cand)-detectLookahead {
					rel = min(rel, f.Start) // it may grow or change: wait for more
					continue
				}
				if f.Start >= rel {
					continue // counted when it is released
				}
				rel = max(rel, f.End)
				countFinding(sc.Name, f.Kind, f.Action)
				if f.Action == Redact {
					o.st.record(sc, Output, Redacted, "")
					masks = append(masks, f)
				} else {
					o.st.record(sc, Output, Flagged, "")
					o.st.g.logger.Info("guardrail finding", zap.String("check", sc.Name), zap.String("stage", "output"), zap.String("kind", f.Kind))
				}
			}
		}
		for changed := true; changed; {
			changed = false
			for _, m := range masks {
				if m.Start < rel && m.End > rel {
					rel, changed = m.Start, true // never release part of a mask
				}
			}
		}
		masks = within(masks, rel)
		for rel > 0 && rel < len(cand) && !utf8.RuneStart(cand[rel]) {
			rel--
		}
	}
	ts.pending = cand[rel:]
	return o.releaseMasked(ts, cand[:rel], masks, final), nil
}

// within returns the masks that end by n.
func within(masks []Finding, n int) []Finding {
	out := masks[:0:0]
	for _, m := range masks {
		if m.End <= n {
			out = append(out, m)
		}
	}
	return out
}

// releaseMasked masks and restores text leaving the stream, keeps back a
// possible placeholder's start unless final, and remembers the released
// model text as context for the checks.
func (o *outputWriter) releaseMasked(ts *streamText, text string, masks []Finding, final bool) string {
	out := text
	if len(masks) > 0 {
		out = mask(text, resolve(masks))
	}
	out, rest := o.st.vault.restore(out, final)
	if rest != "" {
		// rest is unmasked model text (masks hold no '<'): hold it.
		text = text[:len(text)-len(rest)]
		ts.pending = rest + ts.pending
	}
	if len(o.checks) > 0 {
		ts.tail += text
		if len(ts.tail) > o.st.g.Window {
			ts.tail = ts.tail[len(ts.tail)-o.st.g.Window:]
		}
	}
	return out
}

// named remembers which check a cutting finding came from.
func (o *outputWriter) named(sc *Scope, f *Finding) *Finding {
	o.st.record(sc, Output, Blocked, "")
	g := *f
	g.Detail = strings.TrimSpace(sc.Name + "\x00" + f.Detail)
	return &g
}

// mask replaces output findings in a text with [KIND] (or their
// replacement). Lengths change only inside findings at or after their
// start; callers slice from a start before the first.
func mask(text string, fs []Finding) string {
	var b strings.Builder
	at := 0
	for _, f := range fs {
		b.WriteString(text[at:f.Start])
		if f.Replacement != "" {
			b.WriteString(f.Replacement)
		} else {
			b.WriteString("[" + f.Kind + "]")
		}
		at = f.End
	}
	b.WriteString(text[at:])
	return b.String()
}

// cut ends the stream at a blocking finding: what came before it, then an
// error event or a refusal.
func (o *outputWriter) cut(out []byte, ts *streamText, before string, f *Finding) []byte {
	o.blocked = true
	check, detail, _ := strings.Cut(f.Detail, "\x00")
	if before != "" {
		out = o.synthetic(out, ts, before, "")
	}
	out = o.flushAll(out)
	g := *f
	g.Detail = detail
	if o.st.g.OutputBlock == "refusal" {
		out = o.synthetic(out, &streamText{choice: ts.choice, field: ts.field}, o.st.g.Refusal, "content_filter")
		return append(out, "data: [DONE]\n\n"...)
	}
	msg := fmt.Sprintf("the answer was stopped by guardrail %q: %s", check, describe(&g))
	if f.Kind == "" && detail != "" {
		msg = detail
	}
	out = append(out, "data: "...)
	out = append(out, (&openai.Error{Type: "invalid_request_error", Code: "guardrail_blocked", Message: msg}).JSON()...)
	return append(out, "\n\n"...)
}

// flushChoice sends the held text of a finishing choice's streams that
// this chunk did not carry, before the chunk.
func (o *outputWriter) flushChoice(out []byte, choice int32, seen []uint64) []byte {
	for key, ts := range o.streams {
		if ts.choice != choice {
			continue
		}
		if ts.pending != "" && !slices.Contains(seen, key) {
			if out = o.flush(out, ts); o.blocked {
				return out
			}
		}
		delete(o.streams, key)
	}
	return out
}

// flushAll sends every held text.
func (o *outputWriter) flushAll(out []byte) []byte {
	for _, ts := range o.streams {
		if ts.pending != "" {
			blocked := o.blocked
			if out = o.flush(out, ts); o.blocked && !blocked {
				return out
			}
		}
	}
	return out
}

// flush releases one stream's held text, the checks seeing it last.
func (o *outputWriter) flush(out []byte, ts *streamText) []byte {
	send, c := o.advance(ts, "", true)
	if c != nil && !o.blocked {
		return o.cut(out, ts, send, c)
	}
	if send != "" {
		out = o.synthetic(out, ts, send, "")
	}
	return out
}

// synthetic appends a chunk carrying text for one stream, shaped like the
// stream's own chunks.
func (o *outputWriter) synthetic(out []byte, ts *streamText, text, finish string) []byte {
	m := o.meta
	if m == nil {
		m = &chunkMeta{}
	}
	object := m.Object
	if object == "" {
		object = "chat.completion.chunk"
		if o.req.Endpoint == openai.Completions {
			object = "text_completion"
		}
	}
	out = append(out, `data: {"id":`...)
	out = openai.AppendJSONString(out, m.ID)
	out = append(out, `,"object":`...)
	out = openai.AppendJSONString(out, object)
	out = append(out, `,"created":`...)
	out = strconv.AppendInt(out, m.Created, 10)
	out = append(out, `,"model":`...)
	out = openai.AppendJSONString(out, m.Model)
	if m.SystemFingerprint != "" {
		out = append(out, `,"system_fingerprint":`...)
		out = openai.AppendJSONString(out, m.SystemFingerprint)
	}
	out = append(out, `,"choices":[{"index":`...)
	out = strconv.AppendInt(out, int64(ts.choice), 10)
	switch {
	case ts.field == fieldText || ts.field == fieldPrompt:
		out = append(out, `,"text":`...)
		out = openai.AppendJSONString(out, text)
	case ts.field == fieldArguments:
		out = append(out, `,"delta":{"tool_calls":[{"index":`...)
		out = strconv.AppendInt(out, int64(max(ts.tool, 0)), 10)
		out = append(out, `,"function":{"arguments":`...)
		out = openai.AppendJSONString(out, text)
		out = append(out, `}}]}`...)
	default:
		out = append(out, `,"delta":{"content":`...)
		out = openai.AppendJSONString(out, text)
		out = append(out, '}')
	}
	if finish == "" {
		out = append(out, `,"finish_reason":null}]}`...)
	} else {
		out = append(out, `,"finish_reason":`...)
		out = openai.AppendJSONString(out, finish)
		out = append(out, `}]}`...)
	}
	return append(out, "\n\n"...)
}

// --- whole answers ---

// whole checks and restores a complete JSON answer and sends it.
func (o *outputWriter) whole() {
	body := o.buf
	send := func(b []byte) {
		o.Header().Set("Content-Length", strconv.Itoa(len(b)))
		o.Header().Add("Server-Timing", timing("guard-output", o.took))
		o.ResponseWriterWrapper.WriteHeader(o.status)
		_, _ = o.ResponseWriterWrapper.Write(b)
	}
	d := &o.d
	if d.parse(body, fieldNone) != nil {
		send(body)
		return
	}
	texts := make([]string, len(d.spans))
	for i, s := range d.spans {
		texts[i] = d.text(s)
	}
	insp := &Inspection{Stage: Output, Model: o.st.model, Texts: texts, Prompt: o.st.prompt}
	var redact []Finding
	for _, c := range o.checks {
		sc := c.CheckScope()
		fs, err := inspect(o.ctx, c, insp)
		if err != nil {
			if e := o.st.failed(sc, Output, err); e != nil {
				o.Header().Del("Content-Length")
				e.Write(o.ResponseWriterWrapper)
				return
			}
			continue
		}
		outcome := Passed
		for i := range fs {
			f := fs[i]
			countFinding(sc.Name, f.Kind, f.Action)
			switch f.Action {
			case Block:
				o.st.record(sc, Output, Blocked, "")
				o.blockWhole(sc, &f, d, send)
				return
			case Redact:
				outcome = worse(outcome, Redacted)
				redact = append(redact, f)
			case Log:
				outcome = worse(outcome, Flagged)
				o.st.g.logger.Info("guardrail finding", zap.String("check", sc.Name), zap.String("stage", "output"), zap.String("kind", f.Kind))
			}
		}
		o.st.record(sc, Output, outcome, "")
	}
	redact = resolve(redact)
	var edits []edit
	for ti, text := range texts {
		var mine []Finding
		for _, f := range redact {
			if f.Text == ti {
				mine = append(mine, f)
			}
		}
		out := text
		if len(mine) > 0 {
			out = mask(text, mine)
		}
		out, _ = o.st.vault.restore(out, true)
		if out != text {
			edits = append(edits, edit{span: ti, text: out})
		}
	}
	if len(edits) == 0 {
		send(body)
		return
	}
	send(d.splice(make([]byte, 0, len(body)+64), edits))
}

var finishStop = [][]byte{[]byte(`"finish_reason":"stop"`), []byte(`"finish_reason": "stop"`), []byte(`"finish_reason":"length"`), []byte(`"finish_reason": "length"`)}

// blockWhole answers a blocked whole answer: an error, or the refusal in
// place of the answer's text.
func (o *outputWriter) blockWhole(sc *Scope, f *Finding, d *doc, send func([]byte)) {
	if o.st.g.OutputBlock != "refusal" {
		o.Header().Del("Content-Length")
		(&openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "guardrail_blocked",
			Message: fmt.Sprintf("the answer was blocked by guardrail %q: %s", sc.Name, describe(f))}).Write(o.ResponseWriterWrapper)
		return
	}
	var edits []edit
	for i, s := range d.spans {
		text := ""
		if s.field == fieldContent || s.field == fieldText {
			text = o.st.g.Refusal
		}
		edits = append(edits, edit{span: i, text: text})
	}
	b := d.splice(nil, edits)
	for _, fs := range finishStop {
		b = bytes.ReplaceAll(b, fs, []byte(`"finish_reason":"content_filter"`))
	}
	send(b)
}
