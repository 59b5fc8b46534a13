package responsesapi

import (
	"bytes"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// respStream translates a chat-completions SSE stream to the Responses
// API's events as it arrives: response.created and response.in_progress
// first; per output item response.output_item.added, its deltas and
// response.output_item.done; then response.completed (or
// response.incomplete) with the whole response and its usage. Each event
// is framed "event: <type>\ndata: {…}\n\n" and numbered from 0 in
// sequence_number.
//
// Items: chat's reasoning_content (or reasoning) is a reasoning item whose
// text streams as response.reasoning_text.delta; content is a message
// item (response.output_text.delta); each tool call is a function_call
// item (response.function_call_arguments.delta). A reasoning or message
// item ends when another kind of output begins; function calls end when
// the answer finishes, so calls whose deltas interleave stay whole. Texts
// and arguments are carried as the engine escaped them: never decoded,
// never re-encoded.
//
// A chat error event ({"error":{…}}) ends the stream with
// response.failed (the error in response.error) and then an error event,
// which carries the error object as well so that OpenAI's SDKs raise it.
type respStream struct {
	t        *respTurn
	o        respOut
	seq      int64
	out      []byte // translated events not yet written
	in       []byte // received bytes that are not yet a whole line
	data     []byte // the data of the event being read
	cur      *respItem
	calls    []*respItem // open function calls
	sawUsage bool
	done     bool // a terminal event was written
}

func newRespStream(t *respTurn) *respStream {
	s := &respStream{t: t, out: make([]byte, 0, 4096)}
	s.lifecycle("response.created", "in_progress")
	s.lifecycle("response.in_progress", "in_progress")
	if rv := t.retrieval(); rv != nil {
		s.search(rv)
	}
	return s
}

// write reads the SSE lines of b and translates each whole event.
func (s *respStream) write(b []byte) {
	buf, off, from := b, 0, 0
	var one []byte     // the data of the event being read, when it is one line of buf
	if len(s.in) > 0 { // s.in holds no line break: look in b only
		from = len(s.in)
		s.in = append(s.in, b...)
		buf = s.in
	}
	for {
		i := bytes.IndexByte(buf[from:], '\n')
		if i < 0 {
			break
		}
		line := buf[off : from+i]
		off = from + i + 1
		from = off
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		switch {
		case len(line) == 0:
			switch {
			case one != nil:
				s.event(one)
				one = nil
			case len(s.data) > 0:
				s.event(s.data)
				s.data = s.data[:0]
			}
		case bytes.HasPrefix(line, dataField):
			v := line[len(dataField):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if one == nil && len(s.data) == 0 {
				one = v // the usual event: one data line, read where it lies
				continue
			}
			if one != nil {
				s.data, one = append(s.data[:0], one...), nil
			}
			s.data = append(append(s.data, '\n'), v...)
		}
	}
	if one != nil { // the event goes on in the next write: keep its data
		s.data = append(s.data[:0], one...)
	}
	s.in = append(s.in[:0], buf[off:]...)
}

var (
	dataField = []byte("data:")
	doneData  = []byte("[DONE]")
)

// event translates one chat event.
func (s *respStream) event(data []byte) {
	if s.done {
		return
	}
	if bytes.Equal(bytes.TrimSpace(data), doneData) {
		s.finish()
		return
	}
	var errv []byte
	if i := bytes.Index(data, choicesKey); i >= 0 {
		// The usual chunk: read its choices where they are, and the rest
		// only when it may hold usage or an error. A quote that is not
		// escaped is never inside a string, so these keys are keys.
		end := openai.WalkArray(data, openai.SkipSpace(data, i+len(choicesKey)), func(e int) int { return s.choice(data, e) })
		if end < 0 {
			return
		}
		if before, after := data[:i], data[end:]; bytes.Contains(before, usageKey) || bytes.Contains(after, usageKey) ||
			bytes.Contains(before, errorKey) || bytes.Contains(after, errorKey) {
			errv = s.members(data, true)
		}
	} else {
		errv = s.members(data, false)
	}
	if k := openai.KindOf(errv); k == openai.KindObject || k == openai.KindString {
		s.fail(errv)
		return
	}
	if s.o.finish != "" && s.sawUsage {
		s.finish()
	}
}

var (
	choicesKey = []byte(`"choices":`)
	errorKey   = []byte(`"error"`)
	usageKey   = []byte(`"usage"`)
)

// members reads a chunk's members: its choices (unless they have been
// read), its usage; it returns its error, if any.
func (s *respStream) members(data []byte, choicesRead bool) (errv []byte) {
	openai.WalkObject(data, openai.SkipSpace(data, 0), func(k []byte, v int) int {
		switch string(k) {
		case "choices":
			if !choicesRead && v < len(data) && data[v] == '[' {
				return openai.WalkArray(data, v, func(e int) int { return s.choice(data, e) })
			}
		case "usage":
			u, end := openai.ValueAt(data, v)
			if openai.KindOf(u) == openai.KindObject {
				s.o.usage, s.sawUsage = append(s.o.usage[:0], u...), true
			}
			return end
		case "error":
			var end int
			errv, end = openai.ValueAt(data, v)
			return end
		}
		return openai.SkipFast(data, v)
	})
	return errv
}

// chatDelta is what a chunk's choice holds.
type chatDelta struct {
	index                             int
	content, reasoning, calls, finish []byte
}

// choice reads the choice at b[i] and translates it; it returns the
// choice's end.
func (s *respStream) choice(b []byte, i int) int {
	var d chatDelta
	end := openai.WalkObject(b, i, func(k []byte, v int) int {
		var end int
		switch string(k) {
		case "index":
			var n []byte
			n, end = openai.ValueAt(b, v)
			d.index, _ = strconv.Atoi(string(n))
		case "delta":
			end = openai.WalkObject(b, v, func(dk []byte, dv int) int {
				x, end := openai.ValueAt(b, dv)
				switch string(dk) {
				case "content":
					d.content = x
				case "reasoning_content", "reasoning":
					d.reasoning = x
				case "tool_calls":
					d.calls = x
				}
				return end
			})
			if end < 0 {
				end = openai.SkipFast(b, v) // null
			}
		case "finish_reason":
			d.finish, end = openai.ValueAt(b, v)
		default:
			end = openai.SkipFast(b, v)
		}
		return end
	})
	if d.index == 0 { // the Responses API has one answer
		s.apply(&d)
	}
	return end
}

func (s *respStream) apply(d *chatDelta) {
	if openai.KindOf(d.reasoning) == openai.KindString && len(d.reasoning) > 2 {
		s.text('r', d.reasoning)
	}
	if openai.KindOf(d.content) == openai.KindString && len(d.content) > 2 {
		s.text('m', d.content)
	}
	if openai.KindOf(d.calls) == openai.KindArray {
		s.closeCur()
		_ = openai.EachElement(d.calls, func(_ int, tc []byte) error {
			s.toolCall(tc)
			return nil
		})
	}
	if openai.KindOf(d.finish) == openai.KindString {
		s.o.finish = openai.StringValue(d.finish)
		s.closeAll()
	}
}

// text adds a piece of reasoning ('r') or content ('m'), a JSON string.
func (s *respStream) text(kind byte, v []byte) {
	it := s.cur
	if it == nil || it.kind != kind {
		s.closeCur()
		prefix := "msg_"
		if kind == 'r' {
			prefix = "rs_"
		}
		it = s.o.add(kind, prefix)
		if kind == 'm' {
			it.cite = openai.NewCiter(s.t.retrieval())
		}
		s.cur = it
		s.itemEvent("response.output_item.added", it, false)
		s.partEvent("response.content_part.added", it, false)
	}
	head := textDeltaHead
	if kind == 'r' {
		head = reasoningDeltaHead
	}
	s.out = strconv.AppendInt(append(s.out, head...), s.seq, 10)
	s.seq++
	if it.deltaRef == nil {
		it.deltaRef = s.appendRef(nil, it)
		it.deltaRef = append(it.deltaRef, `,"content_index":0,"delta":`...)
	}
	s.out = append(append(append(s.out, it.deltaRef...), v...), `,"logprobs":[]}`+"\n\n"...)
	it.text = append(it.text, v[1:len(v)-1]...)
	if it.cite != nil {
		from := it.cite.Len()
		it.cite.FeedJSON(v[1 : len(v)-1])
		s.annotations(it, from)
	}
}

// The starts of the most frequent events, up to their sequence_number.
const (
	textDeltaHead      = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":"
	reasoningDeltaHead = "event: response.reasoning_text.delta\ndata: {\"type\":\"response.reasoning_text.delta\",\"sequence_number\":"
)

// toolCall adds a tool call's delta: a new call when its index (or id)
// is new, else more of an open call's arguments.
func (s *respStream) toolCall(tc []byte) {
	index, id, name, args := openai.ToolCallFields(tc)
	var it *respItem
	for i := len(s.calls) - 1; i >= 0; i-- {
		if s.calls[i].chat == index {
			it = s.calls[i]
			break
		}
	}
	if it != nil && openai.KindOf(id) == openai.KindString && len(id) > 2 && !bytes.Equal(id, it.callID) {
		it = nil // another call at the same index: an engine that numbers none
	}
	if it == nil {
		it = s.o.add('f', "fc_")
		it.chat, it.callID, it.name = index, bytes.Clone(callID(id)), bytes.Clone(orEmpty(name))
		s.calls = append(s.calls, it)
		s.itemEvent("response.output_item.added", it, false)
	} else if string(it.name) == `""` && openai.KindOf(name) == openai.KindString {
		it.name = bytes.Clone(name)
	}
	if openai.KindOf(args) == openai.KindString && len(args) > 2 {
		s.begin("response.function_call_arguments.delta")
		s.ref(it)
		s.out = append(append(s.out, `,"delta":`...), args...)
		s.end()
		it.text = append(it.text, args[1:len(args)-1]...)
	}
}

// closeCur ends the open reasoning or message item.
func (s *respStream) closeCur() {
	if it := s.cur; it != nil {
		s.cur = nil
		s.close(it, "completed")
	}
}

// closeAll ends every open item, as the answer finishes.
func (s *respStream) closeAll() {
	status, _ := s.o.status()
	if it := s.cur; it != nil {
		s.cur = nil
		s.close(it, status)
	}
	for _, it := range s.calls {
		s.close(it, "completed")
	}
	s.calls = s.calls[:0]
}

func (s *respStream) close(it *respItem, status string) {
	it.status = status
	if it.kind == 'f' {
		s.begin("response.function_call_arguments.done")
		s.ref(it)
		s.out = append(append(s.out, `,"name":`...), it.name...)
		s.out = append(append(append(s.out, `,"arguments":"`...), it.text...), '"')
		s.end()
	} else {
		typ := "response.output_text.done"
		if it.kind == 'r' {
			typ = "response.reasoning_text.done"
		}
		if it.cite != nil {
			from := it.cite.Len()
			it.cite.Finish()
			s.annotations(it, from)
		}
		s.begin(typ)
		s.ref(it)
		s.out = append(append(append(s.out, `,"content_index":0,"text":"`...), it.text...), '"')
		if it.kind == 'm' {
			s.out = append(s.out, `,"logprobs":[]`...)
		}
		s.end()
		s.partEvent("response.content_part.done", it, true)
	}
	s.itemEvent("response.output_item.done", it, true)
}

// finish ends the stream with response.completed or response.incomplete,
// after storing the response.
func (s *respStream) finish() {
	if s.done {
		return
	}
	s.closeAll()
	s.done = true
	status, _ := s.o.status()
	resp := s.lifecycle("response."+status, "")
	s.t.save(&s.o, resp)
}

// fail ends the stream after a chat error event: response.failed, then
// the error.
func (s *respStream) fail(errv []byte) {
	s.done = true
	code, msg, typ := []byte(`"server_error"`), errv, []byte(`"server_error"`)
	if openai.KindOf(errv) == openai.KindObject {
		msg = []byte(`"the model's stream failed"`)
		_ = openai.EachMember(errv, func(k, v []byte) error {
			if openai.KindOf(v) != openai.KindString {
				return nil
			}
			switch string(k) {
			case "code":
				code = bytes.Clone(v)
			case "message":
				msg = bytes.Clone(v)
			case "type":
				typ = bytes.Clone(v)
			}
			return nil
		})
	}
	for _, it := range s.o.items {
		if it.status == "in_progress" {
			it.status = "incomplete"
		}
	}
	s.o.errCode, s.o.errMsg = code, msg
	s.lifecycle("response.failed", "")
	s.begin("error")
	s.out = append(append(append(append(s.out, `,"code":`...), code...), `,"message":`...), msg...)
	s.out = append(append(append(append(s.out, `,"param":null,"error":{"type":`...), typ...), `,"code":`...), code...)
	s.out = append(append(append(s.out, `,"message":`...), msg...), `,"param":null}`...)
	s.end()
}

// begin starts an event of a type; end closes it.
func (s *respStream) begin(typ string) {
	s.out = append(append(append(s.out, "event: "...), typ...), "\ndata: {\"type\":\""...)
	s.out = strconv.AppendInt(append(append(s.out, typ...), `","sequence_number":`...), s.seq, 10)
	s.seq++
}

func (s *respStream) end() { s.out = append(s.out, "}\n\n"...) }

// ref writes an event's item_id and output_index.
func (s *respStream) ref(it *respItem) { s.out = s.appendRef(s.out, it) }

func (s *respStream) appendRef(b []byte, it *respItem) []byte {
	b = append(append(append(b, `,"item_id":"`...), it.id...), `","output_index":`...)
	return strconv.AppendInt(b, int64(it.index), 10)
}

// lifecycle writes an event that carries the response object, and
// returns the object's bytes.
func (s *respStream) lifecycle(typ, status string) []byte {
	s.begin(typ)
	s.out = append(s.out, `,"response":`...)
	at := len(s.out)
	s.out = s.t.appendResponse(s.out, &s.o, status)
	resp := s.out[at:]
	s.end()
	return resp
}

func (s *respStream) itemEvent(typ string, it *respItem, full bool) {
	s.begin(typ)
	s.out = strconv.AppendInt(append(s.out, `,"output_index":`...), int64(it.index), 10)
	s.out = it.appendItem(append(s.out, `,"item":`...), full)
	s.end()
}

func (s *respStream) partEvent(typ string, it *respItem, full bool) {
	s.begin(typ)
	s.ref(it)
	s.out = append(s.out, `,"content_index":0,"part":`...)
	if full {
		s.out = it.appendPart(s.out)
	} else {
		text, cite := it.text, it.cite
		it.text, it.cite = nil, nil
		s.out = it.appendPart(s.out)
		it.text, it.cite = text, cite
	}
	s.end()
}

// search writes the file_search_call item, first in the output: added,
// in progress, searching, completed (unless the search failed), done.
func (s *respStream) search(rv *openai.Retrieval) {
	it := s.t.search(&s.o, rv)
	s.itemEvent("response.output_item.added", it, false)
	for _, typ := range [...]string{"response.file_search_call.in_progress", "response.file_search_call.searching",
		"response.file_search_call.completed"} {
		if typ == "response.file_search_call.completed" && it.status != "completed" {
			break
		}
		s.begin(typ)
		s.ref(it)
		s.end()
	}
	s.itemEvent("response.output_item.done", it, true)
}

// annotations writes a message's annotations from the from-th on as
// response.output_text.annotation.added events.
func (s *respStream) annotations(it *respItem, from int) {
	for k := from; k < it.cite.Len(); k++ {
		s.begin("response.output_text.annotation.added")
		s.ref(it)
		s.out = strconv.AppendInt(append(s.out, `,"content_index":0,"annotation_index":`...), int64(k), 10)
		s.out = it.cite.AppendAnnotation(append(s.out, `,"annotation":`...), k)
		s.end()
	}
}
