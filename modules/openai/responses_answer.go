package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Writer returns the writer that turns the chat-completions answer written
// to it into the Responses answer on w.
func (t *respTurn) Writer(w http.ResponseWriter) http.ResponseWriter {
	return &respWriter{w: w, t: t}
}

// respWriter translates one answer. A status >= 300 and its body pass
// unchanged (chat's errors have the Responses API's shape). A JSON body
// is collected until its object closes, then written as one response
// object with its own Content-Length. An SSE body is translated event by
// event as it arrives, in whatever pieces it is written.
type respWriter struct {
	w      http.ResponseWriter
	t      *respTurn
	mode   uint8
	status int
	whole  []byte   // modeWhole: the body so far
	end    jsonScan // modeWhole: where the body's object ends
	s      *respStream
}

const (
	modeUndecided = iota
	modePass
	modeWhole
	modeStream
	modeDone // modeWhole, written
)

func (w *respWriter) Header() http.Header { return w.w.Header() }

func (w *respWriter) WriteHeader(status int) {
	if w.mode != modeUndecided {
		return
	}
	if status < 200 {
		w.w.WriteHeader(status) // informational: the answer follows
		return
	}
	w.status = status
	h := w.w.Header()
	switch {
	case status >= 300:
		w.mode = modePass
		w.w.WriteHeader(status)
	case isEventStream(h):
		w.mode = modeStream
		h.Del("Content-Length")
		w.w.WriteHeader(status)
		w.s = newRespStream(w.t)
	default:
		w.mode = modeWhole
		h.Del("Content-Length")
	}
}

func isEventStream(h http.Header) bool {
	ct := h.Get("Content-Type")
	return len(ct) >= 17 && ct[:17] == "text/event-stream"
}

func (w *respWriter) Write(b []byte) (int, error) {
	if w.mode == modeUndecided {
		w.WriteHeader(http.StatusOK)
	}
	switch w.mode {
	case modePass:
		return w.w.Write(b)
	case modeStream:
		w.s.write(b)
		return len(b), w.drain()
	case modeWhole:
		return len(b), w.collect(b)
	}
	return len(b), nil // after a whole answer: trailing bytes
}

// collect gathers a whole answer until its object closes, then writes
// its translation.
func (w *respWriter) collect(b []byte) error {
	start := len(w.whole)
	w.whole = append(w.whole, b...)
	end := w.end.feed(w.whole, start)
	switch {
	case end == jsonNotObject:
		w.mode = modePass
		w.w.Header().Set("Content-Length", strconv.Itoa(len(w.whole)))
		w.w.WriteHeader(w.status)
		_, err := w.w.Write(w.whole)
		return err
	case end < 0:
		return nil
	}
	w.mode = modeDone
	out, err := w.t.wholeAnswer(w.whole[:end])
	if err != nil {
		(&Error{Status: http.StatusBadGateway, Type: "server_error", Code: "untranslatable_answer",
			Message: "the model's answer could not be translated to the Responses API: " + err.Error()}).Write(w.w)
		return nil
	}
	h := w.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.w.WriteHeader(w.status)
	_, err = w.w.Write(out)
	return err
}

func (w *respWriter) drain() error {
	if len(w.s.out) == 0 {
		return nil
	}
	_, err := w.w.Write(w.s.out)
	w.s.out = w.s.out[:0]
	return err
}

// FlushError sends what has been translated; a whole answer is sent
// only once it is complete.
func (w *respWriter) FlushError() error {
	switch w.mode {
	case modeStream:
		if err := w.drain(); err != nil {
			return err
		}
	case modeWhole, modeUndecided:
		return nil
	}
	return http.NewResponseController(w.w).Flush()
}

// Unwrap lets http.ResponseController reach the client's writer.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.w }

// jsonScan finds where the JSON object at the start of a body ends,
// across the pieces it arrives in.
type jsonScan struct {
	started, inString, escaped bool
	depth                      int
}

const jsonNotObject = -2

// feed scans b[from:] and returns the end of the object (the index after
// its closing brace), -1 while it is open, or jsonNotObject.
func (s *jsonScan) feed(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		c := b[i]
		switch {
		case !s.started:
			switch c {
			case ' ', '\t', '\r', '\n':
				continue
			case '{':
				s.started, s.depth = true, 1
				continue
			}
			return jsonNotObject
		case s.escaped:
			s.escaped = false
		case s.inString:
			switch c {
			case '\\':
				s.escaped = true
			case '"':
				s.inString = false
			}
		case c == '"':
			s.inString = true
		case c == '{' || c == '[':
			s.depth++
		case c == '}' || c == ']':
			if s.depth--; s.depth == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// respItem is one output item of a response.
type respItem struct {
	kind   byte   // 'r' reasoning, 'm' message, 'f' function call
	id     string // rs_…, msg_…, fc_…
	index  int    // output_index
	text   []byte // the text, reasoning or arguments: a JSON string's inside, as the engine escaped it
	callID []byte // function call: the call's id and name, JSON strings
	name   []byte
	chat   int // function call: its index in the chat stream
	status string
}

// respOut is an answer's output: its items, how it finished and its usage.
type respOut struct {
	items   []*respItem
	finish  string
	usage   []byte // chat's usage object, nil when there is none
	errCode []byte // a failed answer: its error's code and message, JSON strings
	errMsg  []byte
}

func (o *respOut) add(kind byte, prefix string) *respItem {
	it := &respItem{kind: kind, id: newID(prefix), index: len(o.items), status: "in_progress"}
	o.items = append(o.items, it)
	return it
}

// status maps chat's finish reason to the response's status.
func (o *respOut) status() (status, reason string) {
	switch o.finish {
	case "length":
		return "incomplete", "max_output_tokens"
	case "content_filter":
		return "incomplete", "content_filter"
	}
	return "completed", ""
}

// wholeAnswer translates a non-streamed chat completion.
func (t *respTurn) wholeAnswer(body []byte) ([]byte, error) {
	var o respOut
	var choice, msg []byte
	_ = eachMember(body, func(k, v []byte) error {
		switch string(k) {
		case "choices":
			_ = eachElement(v, func(i int, c []byte) error {
				if i == 0 {
					choice = c
				}
				return nil
			})
		case "usage":
			if kindOf(v) == kObject {
				o.usage = v
			}
		}
		return nil
	})
	_ = eachMember(choice, func(k, v []byte) error {
		switch string(k) {
		case "message":
			msg = v
		case "finish_reason":
			o.finish = str(v)
		}
		return nil
	})
	if kindOf(msg) != kObject {
		return nil, errNoMessage
	}
	var content, reasoning, calls []byte
	_ = eachMember(msg, func(k, v []byte) error {
		switch string(k) {
		case "content":
			content = v
		case "reasoning_content", "reasoning":
			if kindOf(v) == kString && len(v) > 2 {
				reasoning = v
			}
		case "tool_calls":
			calls = v
		}
		return nil
	})
	status, _ := o.status()
	if reasoning != nil {
		it := o.add('r', "rs_")
		it.text, it.status = reasoning[1:len(reasoning)-1], "completed"
	}
	if kindOf(content) == kString && (len(content) > 2 || kindOf(calls) != kArray) {
		it := o.add('m', "msg_")
		it.text, it.status = content[1:len(content)-1], status
	}
	_ = eachElement(calls, func(_ int, c []byte) error {
		o.wholeCall(c)
		return nil
	})
	if len(o.items) == 0 {
		it := o.add('m', "msg_")
		it.status = status
	}
	resp := t.appendResponse(nil, &o, "")
	t.save(&o, resp)
	return resp, nil
}

var errNoMessage = jsonError("the answer has no choices[0].message")

type jsonError string

func (e jsonError) Error() string { return string(e) }

func (o *respOut) wholeCall(c []byte) {
	var id, name, args []byte
	_ = eachMember(c, func(k, v []byte) error {
		switch string(k) {
		case "id":
			id = v
		case "function":
			_ = eachMember(v, func(fk, fv []byte) error {
				switch string(fk) {
				case "name":
					name = fv
				case "arguments":
					args = fv
				}
				return nil
			})
		}
		return nil
	})
	it := o.add('f', "fc_")
	it.callID, it.name, it.status = callID(id), orEmpty(name), "completed"
	switch kindOf(args) {
	case kString:
		it.text = args[1 : len(args)-1]
	case kObject: // some engines send the arguments as an object
		q, _ := json.Marshal(string(compact(args)))
		it.text = q[1 : len(q)-1]
	}
}

// callID is a call's id, or a new one when the engine gave none.
func callID(id []byte) []byte {
	if kindOf(id) == kString && len(id) > 2 {
		return id
	}
	return []byte(`"` + newID("call_") + `"`)
}

func orEmpty(s []byte) []byte {
	if kindOf(s) == kString {
		return s
	}
	return []byte(`""`)
}

// appendResponse writes the response object; status "" is the
// finished answer's.
func (t *respTurn) appendResponse(b []byte, o *respOut, status string) []byte {
	st, reason := o.status()
	switch {
	case status != "":
	case o.errMsg != nil:
		status = "failed"
	default:
		status = st
	}
	b = append(b, `{"id":"`...)
	b = append(b, t.id...)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, t.created, 10)
	b = append(append(append(b, `,"status":"`...), status...), `","background":false`...)
	if status == "completed" {
		b = strconv.AppendInt(append(b, `,"completed_at":`...), now().Unix(), 10)
	}
	if o.errMsg != nil {
		b = append(append(append(append(b, `,"error":{"code":`...), o.errCode...), `,"message":`...), o.errMsg...)
		b = append(b, '}')
	} else {
		b = append(b, `,"error":null`...)
	}
	if reason != "" && status == "incomplete" {
		b = append(append(append(b, `,"incomplete_details":{"reason":"`...), reason...), `"}`...)
	} else {
		b = append(b, `,"incomplete_details":null`...)
	}
	b = appendMember(b, "instructions", or(t.instructions, "null"))
	b = appendMember(b, "max_output_tokens", or(t.maxOutput, "null"))
	b = appendMember(b, "metadata", or(t.metadata, "{}"))
	b = appendMember(b, "model", t.model)
	b = append(b, `,"output":[`...)
	for i, it := range o.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = it.appendItem(b, true)
	}
	b = append(b, ']')
	b = appendMember(b, "parallel_tool_calls", or(t.parallel, "true"))
	b = appendMember(b, "previous_response_id", or(t.previousID, "null"))
	b = append(append(append(b, `,"reasoning":{"effort":`...), or(t.effort, "null")...), `,"summary":null}`...)
	b = strconv.AppendBool(append(b, `,"store":`...), t.store)
	b = appendMember(b, "temperature", or(t.temperature, "1"))
	b = appendMember(b, "text", or(t.text, `{"format":{"type":"text"}}`))
	b = appendMember(b, "tool_choice", or(t.toolChoice, `"auto"`))
	b = appendMember(b, "tools", or(t.tools, "[]"))
	b = appendMember(b, "top_p", or(t.topP, "1"))
	b = appendMember(b, "truncation", or(t.truncation, `"disabled"`))
	b = appendUsage(append(b, `,"usage":`...), o.usage)
	b = appendMember(b, "user", or(t.user, "null"))
	return append(b, '}')
}

func or(v []byte, def string) []byte {
	if len(v) == 0 {
		return []byte(def)
	}
	return v
}

// appendItem writes an output item: whole (full), or as it starts.
func (it *respItem) appendItem(b []byte, full bool) []byte {
	b = append(append(append(b, `{"id":"`...), it.id...), `","type":"`...)
	status := it.status
	if !full {
		status = "in_progress"
	}
	switch it.kind {
	case 'm':
		b = append(append(append(b, `message","status":"`...), status...), `","role":"assistant","content":[`...)
		if full {
			b = it.appendPart(b)
		}
		return append(b, "]}"...)
	case 'r':
		b = append(append(append(b, `reasoning","status":"`...), status...), `","summary":[],"content":[`...)
		if full {
			b = it.appendPart(b)
		}
		return append(b, "]}"...)
	}
	b = append(append(append(b, `function_call","status":"`...), status...), `","call_id":`...)
	b = append(append(append(b, it.callID...), `,"name":`...), it.name...)
	b = append(b, `,"arguments":"`...)
	if full {
		b = append(b, it.text...)
	}
	return append(b, `"}`...)
}

// appendPart writes the content part of a message or reasoning item.
func (it *respItem) appendPart(b []byte) []byte {
	if it.kind == 'r' {
		b = append(b, `{"type":"reasoning_text","text":"`...)
	} else {
		b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	}
	return append(append(b, it.text...), `"}`...)
}

// chatUsage is chat's usage object.
type chatUsage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
	PromptDetails    *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionDetails *struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// appendUsage writes chat's usage in the Responses API's terms, or null.
func appendUsage(b, usage []byte) []byte {
	var u chatUsage
	if usage == nil || json.Unmarshal(usage, &u) != nil {
		return append(b, "null"...)
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	var cached, reasoning int64
	if u.PromptDetails != nil {
		cached = u.PromptDetails.CachedTokens
	}
	if u.CompletionDetails != nil {
		reasoning = u.CompletionDetails.ReasoningTokens
	}
	b = strconv.AppendInt(append(b, `{"input_tokens":`...), u.PromptTokens, 10)
	b = strconv.AppendInt(append(b, `,"input_tokens_details":{"cached_tokens":`...), cached, 10)
	b = strconv.AppendInt(append(b, `},"output_tokens":`...), u.CompletionTokens, 10)
	b = strconv.AppendInt(append(b, `,"output_tokens_details":{"reasoning_tokens":`...), reasoning, 10)
	b = strconv.AppendInt(append(b, `},"total_tokens":`...), u.TotalTokens, 10)
	return append(b, '}')
}

// storeTimeout bounds storing one response, which the answer waits for
// (so that a next turn can name it at once).
const storeTimeout = 5 * time.Second

// save stores a finished response unless the client said store: false.
// A store that fails costs the client its previous_response_id, never
// the answer.
func (t *respTurn) save(o *respOut, resp []byte) {
	if !t.store {
		return
	}
	rec := make([]byte, 0, len(resp)+len(t.convo)+len(t.input)+256)
	rec = append(append(rec, `{"response":`...), resp...)
	rec = append(rec, `,"messages":[`...)
	if len(t.convo) > 0 {
		rec = append(append(rec, t.convo...), ',')
	}
	rec = o.appendChatMessage(rec)
	rec = append(append(append(rec, `],"input":`...), or(t.input, "null")...), '}')
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), storeTimeout)
	defer cancel()
	_ = currentStore().Put(ctx, t.scope, t.id, rec, storeTTL)
}

// appendChatMessage writes the answer as a chat assistant message, for
// the conversation a later turn continues.
func (o *respOut) appendChatMessage(b []byte) []byte {
	b = append(b, `{"role":"assistant","content":`...)
	text, calls := false, 0
	for _, it := range o.items {
		if it.kind == 'm' {
			if !text {
				b, text = append(b, '"'), true
			}
			b = append(b, it.text...)
		}
	}
	if text {
		b = append(b, '"')
	} else {
		b = append(b, "null"...)
	}
	for _, it := range o.items {
		if it.kind != 'f' {
			continue
		}
		if calls++; calls == 1 {
			b = append(b, `,"tool_calls":[`...)
		} else {
			b = append(b, ',')
		}
		b = append(append(append(b, `{"id":`...), it.callID...), `,"type":"function","function":{"name":`...)
		b = append(append(append(b, it.name...), `,"arguments":"`...), it.text...)
		b = append(b, `"}}`...)
	}
	if calls > 0 {
		b = append(b, ']')
	}
	return append(b, '}')
}
