package responsesapi

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/llmgw/llmgw/modules/openai"
)

// respItem is one output item of a response.
type respItem struct {
	kind   byte   // 'r' reasoning, 'm' message, 'f' function call, 's' file search
	id     string // rs_…, msg_…, fc_…, fs_…
	index  int    // output_index
	text   []byte // the text, reasoning or arguments: a JSON string's inside, as the engine escaped it; a search: the whole item
	callID []byte // function call: the call's id and name, JSON strings
	name   []byte
	chat   int // function call: its index in the chat stream
	status string
	// deltaRef is what a stream's delta events of the item repeat:
	// item_id, output_index and content_index.
	deltaRef []byte
	cite     *openai.Citer // a message's citations, nil when nothing was searched
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
	msg := o.readChoice(body)
	if openai.KindOf(msg) != openai.KindObject {
		return nil, errNoMessage
	}
	if rv := t.retrieval(); rv != nil {
		t.search(&o, rv)
	}
	var content, reasoning, calls []byte
	_ = openai.EachMember(msg, func(k, v []byte) error {
		switch string(k) {
		case "content":
			content = v
		case "reasoning_content", "reasoning":
			if openai.KindOf(v) == openai.KindString && len(v) > 2 {
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
	if openai.KindOf(content) == openai.KindString && (len(content) > 2 || openai.KindOf(calls) != openai.KindArray) {
		it := o.add('m', "msg_")
		it.text, it.status = content[1:len(content)-1], status
		if it.cite = openai.NewCiter(t.retrieval()); it.cite != nil {
			it.cite.FeedJSON(it.text)
			it.cite.Finish()
		}
	}
	_ = openai.EachElement(calls, func(_ int, c []byte) error {
		o.wholeCall(c)
		return nil
	})
	if len(o.items) == 0 || o.items[len(o.items)-1].kind == 's' {
		o.add('m', "msg_").status = status
	}
	// One buffer of about the answer's size: the response echoes the
	// request's settings around the output.
	resp := t.appendResponse(make([]byte, 0, 2*len(body)+len(t.instructions)+1024), &o, "")
	t.save(&o, resp)
	return resp, nil
}

var errNoMessage = errors.New("the answer has no choices[0].message")

// readChoice reads a chat completion's usage and first choice's finish
// reason, and returns that choice's message.
func (o *respOut) readChoice(body []byte) (msg []byte) {
	var choice []byte
	_ = openai.EachMember(body, func(k, v []byte) error {
		switch string(k) {
		case "choices":
			_ = openai.EachElement(v, func(i int, c []byte) error {
				if i == 0 {
					choice = c
				}
				return nil
			})
		case "usage":
			if openai.KindOf(v) == openai.KindObject {
				o.usage = v
			}
		}
		return nil
	})
	_ = openai.EachMember(choice, func(k, v []byte) error {
		switch string(k) {
		case "message":
			msg = v
		case "finish_reason":
			o.finish = openai.StringValue(v)
		}
		return nil
	})
	return msg
}

func (o *respOut) wholeCall(c []byte) {
	_, id, name, args := openai.ToolCallFields(c)
	it := o.add('f', "fc_")
	it.callID, it.name, it.status = callID(id), orEmpty(name), "completed"
	switch openai.KindOf(args) {
	case openai.KindString:
		it.text = args[1 : len(args)-1]
	case openai.KindObject: // some engines send the arguments as an object
		q, _ := json.Marshal(string(openai.Compact(args)))
		it.text = q[1 : len(q)-1]
	}
}

// callID is a call's id, or a new one when the engine gave none.
func callID(id []byte) []byte {
	if openai.KindOf(id) == openai.KindString && len(id) > 2 {
		return id
	}
	return []byte(`"` + newID("call_") + `"`)
}

func orEmpty(s []byte) []byte {
	if openai.KindOf(s) == openai.KindString {
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
		b = strconv.AppendInt(append(b, `,"completed_at":`...), respNow().Unix(), 10)
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
	b = appendMember(b, "instructions", orJSON(t.instructions, "null"))
	b = appendMember(b, "max_output_tokens", t.maxOutputShown())
	b = appendMember(b, "metadata", orJSON(t.metadata, "{}"))
	b = appendMember(b, "model", t.model)
	b = append(b, `,"output":[`...)
	for i, it := range o.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = it.appendItem(b, true)
	}
	b = append(b, ']')
	b = appendMember(b, "parallel_tool_calls", orJSON(t.parallel, "true"))
	b = appendMember(b, "previous_response_id", orJSON(t.previousID, "null"))
	b = append(append(append(b, `,"reasoning":{"effort":`...), orJSON(t.effort, "null")...), `,"summary":null}`...)
	b = strconv.AppendBool(append(b, `,"store":`...), t.store)
	b = appendMember(b, "temperature", orJSON(t.temperature, "1"))
	b = appendMember(b, "text", orJSON(t.text, `{"format":{"type":"text"}}`))
	b = appendMember(b, "tool_choice", orJSON(t.toolChoice, `"auto"`))
	b = appendMember(b, "tools", orJSON(t.tools, "[]"))
	b = appendMember(b, "top_p", orJSON(t.topP, "1"))
	if t.truncateAuto {
		b = append(b, `,"truncation":"auto"`...)
	} else {
		b = append(b, `,"truncation":"disabled"`...)
	}
	b = appendUsage(append(b, `,"usage":`...), o.usage)
	b = appendMember(b, "user", orJSON(t.user, "null"))
	return append(b, '}')
}

// maxOutputShown is the answer's max_output_tokens: the request's, or the
// gateway's output cap when it set one for a request that asked none.
func (t *respTurn) maxOutputShown() []byte {
	if len(t.maxOutput) == 0 && t.req != nil && t.req.MaxTokens > 0 {
		return strconv.AppendInt(nil, t.req.MaxTokens, 10)
	}
	return orJSON(t.maxOutput, "null")
}

func orJSON(v []byte, def string) []byte {
	if len(v) == 0 {
		return []byte(def)
	}
	return v
}

// appendItem writes an output item: whole (full), or as it starts.
func (it *respItem) appendItem(b []byte, full bool) []byte {
	if it.kind == 's' {
		return it.appendSearchItem(b, full)
	}
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
	switch {
	case it.kind == 'r':
		b = append(b, `{"type":"reasoning_text","text":"`...)
	case it.cite != nil:
		b = it.cite.AppendAnnotations(append(b, `{"type":"output_text","annotations":[`...))
		b = append(b, `],"logprobs":[],"text":"`...)
	default:
		b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	}
	return append(append(b, it.text...), `"}`...)
}

// respUsage is chat's usage object.
type respUsage struct {
	PromptTokens, CompletionTokens, TotalTokens int64
	CachedTokens, ReasoningTokens               int64
}

// readUsage reads chat's usage object by its bytes.
func readUsage(usage []byte) (u respUsage, ok bool) {
	num := func(v []byte) int64 {
		n, _ := strconv.ParseInt(string(v), 10, 64)
		return n
	}
	err := openai.EachMember(usage, func(k, v []byte) error {
		switch string(k) {
		case "prompt_tokens":
			u.PromptTokens = num(v)
		case "completion_tokens":
			u.CompletionTokens = num(v)
		case "total_tokens":
			u.TotalTokens = num(v)
		case "prompt_tokens_details", "completion_tokens_details":
			if openai.KindOf(v) != openai.KindObject {
				return nil
			}
			return openai.EachMember(v, func(dk, dv []byte) error {
				switch string(dk) {
				case "cached_tokens":
					u.CachedTokens = num(dv)
				case "reasoning_tokens":
					u.ReasoningTokens = num(dv)
				}
				return nil
			})
		}
		return nil
	})
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, err == nil
}

// appendUsage writes chat's usage in the Responses API's terms, or null.
func appendUsage(b, usage []byte) []byte {
	u, ok := readUsage(usage)
	if usage == nil || !ok {
		return append(b, "null"...)
	}
	b = strconv.AppendInt(append(b, `{"input_tokens":`...), u.PromptTokens, 10)
	b = strconv.AppendInt(append(b, `,"input_tokens_details":{"cached_tokens":`...), u.CachedTokens, 10)
	b = strconv.AppendInt(append(b, `},"output_tokens":`...), u.CompletionTokens, 10)
	b = strconv.AppendInt(append(b, `,"output_tokens_details":{"reasoning_tokens":`...), u.ReasoningTokens, 10)
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
	rec = append(append(append(rec, `],"input":`...), orJSON(t.input, "null")...), '}')
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
