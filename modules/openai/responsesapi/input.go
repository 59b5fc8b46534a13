package responsesapi

import (
	"fmt"
	"net/http"

	"github.com/llmgw/llmgw/modules/openai"
)

// chatMessages writes chat messages from Responses input items. An
// assistant message stays open while function_call items follow it, so
// that the calls of one turn travel in one message, as chat wants them
// before their tool messages.
type chatMessages struct {
	b       []byte // messages written: elements of an array, comma-separated
	open    bool   // an assistant message is open
	content []byte // its content, nil for null
	calls   []byte // its tool calls: elements of an array
}

func (c *chatMessages) add(msg ...[]byte) {
	c.flush()
	if len(c.b) > 0 {
		c.b = append(c.b, ',')
	}
	for _, m := range msg {
		c.b = append(c.b, m...)
	}
}

func (c *chatMessages) flush() {
	if !c.open {
		return
	}
	c.open = false
	content := c.content
	if content == nil {
		content = []byte("null")
	}
	calls := c.calls
	c.content, c.calls = nil, nil
	if len(calls) == 0 {
		c.add([]byte(`{"role":"assistant","content":`), content, []byte("}"))
		return
	}
	c.add([]byte(`{"role":"assistant","content":`), content, []byte(`,"tool_calls":[`), calls, []byte("]}"))
}

func (c *chatMessages) done() []byte {
	c.flush()
	return c.b
}

// input adds the messages of a Responses input: a string is one user
// message; an array holds items.
func (c *chatMessages) input(v []byte) error {
	switch openai.KindOf(v) {
	case openai.KindNull:
		return nil
	case openai.KindString:
		c.add([]byte(`{"role":"user","content":`), v, []byte("}"))
		return nil
	}
	return openai.EachElement(v, func(i int, item []byte) error {
		return c.item(fmt.Sprintf("input[%d]", i), item)
	})
}

// inputItem holds the members of an input item that translation reads.
type inputItem struct {
	typ, role                                string
	content, callID, name, arguments, output []byte
}

func (c *chatMessages) item(at string, v []byte) error {
	if openai.KindOf(v) != openai.KindObject {
		return openai.TypeError(at, "an input item object such as {\"role\":\"user\",\"content\":\"…\"}")
	}
	var it inputItem
	hasRole := false
	_ = openai.EachMember(v, func(key, mv []byte) error {
		switch string(key) {
		case "type":
			it.typ = openai.StringValue(mv)
		case "role":
			it.role, hasRole = openai.StringValue(mv), true
		case "content":
			it.content = mv
		case "call_id":
			it.callID = mv
		case "name":
			it.name = mv
		case "arguments":
			it.arguments = mv
		case "output":
			it.output = mv
		}
		return nil
	})
	switch {
	case it.typ == "message" || (it.typ == "" && hasRole):
		return c.message(at, &it)
	case it.typ == "function_call":
		return c.functionCall(at, &it)
	case it.typ == "function_call_output":
		return c.functionOutput(at, &it)
	case it.typ == "reasoning":
		return nil // chat engines take no reasoning back
	case it.typ == "file_search_call":
		// An earlier turn's search: its passages were that turn's
		// context and its answer is in the conversation; this turn
		// searches again when it has the tool.
		return nil
	case it.typ == "item_reference":
		return respUnsupported(at+".type", fmt.Sprintf("%s: item_reference is not supported by this gateway; send the items themselves, or use previous_response_id", at))
	case it.typ == "":
		return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "missing_required_parameter", Param: at + ".type",
			Message: at + " needs a type (such as \"message\" or \"function_call_output\") or a role"}
	}
	return respUnsupported(at+".type", fmt.Sprintf("%s.type %q is not supported by this gateway; send message, function_call, function_call_output, reasoning or file_search_call items", at, it.typ))
}

func respUnsupported(param, msg string) *openai.Error {
	return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "unsupported_value", Param: param, Message: msg}
}

func respMissing(param, what string) *openai.Error {
	return &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "missing_required_parameter", Param: param,
		Message: param + " is missing; it must be " + what}
}

func (c *chatMessages) message(at string, it *inputItem) error {
	role := it.role
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system" // chat engines' templates know system
	default:
		return &openai.Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: at + ".role",
			Message: at + ".role must be one of \"user\", \"assistant\", \"system\" or \"developer\""}
	}
	if openai.KindOf(it.content) == openai.KindNull {
		return respMissing(at+".content", "a string or an array of content parts")
	}
	content, err := chatContent(at+".content", role, it.content)
	if err != nil {
		return err
	}
	if role == "assistant" {
		c.flush()
		c.open, c.content = true, content
		return nil
	}
	c.add([]byte(`{"role":"`+role+`","content":`), content, []byte("}"))
	return nil
}

func (c *chatMessages) functionCall(at string, it *inputItem) error {
	for _, m := range [...]struct {
		k string
		v []byte
	}{{"call_id", it.callID}, {"name", it.name}, {"arguments", it.arguments}} {
		if openai.KindOf(m.v) != openai.KindString {
			if openai.KindOf(m.v) == openai.KindNull {
				return respMissing(at+"."+m.k, "a string")
			}
			return openai.TypeError(at+"."+m.k, "a string")
		}
	}
	if !c.open {
		c.flush()
		c.open = true
	}
	if len(c.calls) > 0 {
		c.calls = append(c.calls, ',')
	}
	c.calls = append(append(c.calls, `{"id":`...), it.callID...)
	c.calls = append(append(c.calls, `,"type":"function","function":{"name":`...), it.name...)
	c.calls = append(append(c.calls, `,"arguments":`...), it.arguments...)
	c.calls = append(c.calls, "}}"...)
	return nil
}

func (c *chatMessages) functionOutput(at string, it *inputItem) error {
	switch openai.KindOf(it.callID) {
	case openai.KindString:
	case openai.KindNull:
		return respMissing(at+".call_id", "a string")
	default:
		return openai.TypeError(at+".call_id", "a string")
	}
	if openai.KindOf(it.output) == openai.KindNull {
		return respMissing(at+".output", "a string or an array of input_text parts")
	}
	content, err := chatContent(at+".output", "tool", it.output)
	if err != nil {
		return err
	}
	c.add([]byte(`{"role":"tool","tool_call_id":`), it.callID, []byte(`,"content":`), content, []byte("}"))
	return nil
}

// chatContent translates a message's content (or a function output): a
// string as it is; parts to chat's parts, or to the text itself when
// there is one text part.
func chatContent(at, role string, v []byte) ([]byte, error) {
	switch openai.KindOf(v) {
	case openai.KindString:
		return v, nil
	case openai.KindArray:
	default:
		return nil, openai.TypeError(at, "a string or an array of content parts")
	}
	var out []byte
	var text []byte // the text of a lone text part
	n := 0
	err := openai.EachElement(v, func(j int, part []byte) error {
		p, t, err := respChatPart(fmt.Sprintf("%s[%d]", at, j), role, part)
		if err != nil {
			return err
		}
		if n++; n == 1 {
			out = append(make([]byte, 0, len(v)+32), '[')
		} else {
			out = append(out, ',')
		}
		out, text = append(out, p...), t
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return []byte(`""`), nil
	case n == 1 && text != nil:
		return text, nil
	}
	return append(out, ']'), nil
}

// respChatPart translates one content part; text is the part's text when it
// is a text part.
func respChatPart(at, role string, part []byte) (out, text []byte, err error) {
	if openai.KindOf(part) != openai.KindObject {
		return nil, nil, openai.TypeError(at, "an object such as {\"type\":\"input_text\",\"text\":\"…\"}")
	}
	var typ string
	var txt, refusal, url, detail, fileID []byte
	_ = openai.EachMember(part, func(key, mv []byte) error {
		switch string(key) {
		case "type":
			typ = openai.StringValue(mv)
		case "text":
			txt = mv
		case "refusal":
			refusal = mv
		case "image_url":
			url = mv
		case "detail":
			detail = mv
		case "file_id":
			fileID = mv
		}
		return nil
	})
	switch typ {
	case "input_text", "output_text", "text", "refusal":
		field := ".text"
		if typ == "refusal" {
			txt, field = refusal, ".refusal"
		}
		if openai.KindOf(txt) != openai.KindString {
			if openai.KindOf(txt) == openai.KindNull {
				return nil, nil, respMissing(at+field, "a string")
			}
			return nil, nil, openai.TypeError(at+field, "a string")
		}
		return append(append([]byte(`{"type":"text","text":`), txt...), '}'), txt, nil
	case "input_image":
		return respImagePart(at, role, url, detail, fileID)
	case "input_file":
		return nil, nil, respUnsupported(at+".type", at+": input_file parts are not supported by this gateway; send the file's text as input_text")
	case "":
		return nil, nil, respMissing(at+".type", "a string such as \"input_text\"")
	}
	return nil, nil, respUnsupported(at+".type", fmt.Sprintf("%s.type %q is not supported by this gateway; use input_text or input_image", at, typ))
}

func respImagePart(at, role string, url, detail, fileID []byte) ([]byte, []byte, error) {
	if role != "user" {
		return nil, nil, respUnsupported(at+".type", at+": images are accepted in user messages only")
	}
	switch openai.KindOf(url) {
	case openai.KindString:
	case openai.KindNull:
		if openai.KindOf(fileID) != openai.KindNull {
			return nil, nil, respUnsupported(at+".file_id", at+".file_id is not supported by this gateway; send the image as image_url (an https URL or a data: URL)")
		}
		return nil, nil, respMissing(at+".image_url", "a string (an https URL or a data: URL)")
	default:
		return nil, nil, openai.TypeError(at+".image_url", "a string (an https URL or a data: URL)")
	}
	if err := openai.CheckMediaURL(at+".image_url", url); err != nil {
		return nil, nil, err
	}
	out := append(make([]byte, 0, len(url)+64), `{"type":"image_url","image_url":{"url":`...)
	out = append(out, url...)
	if openai.KindOf(detail) != openai.KindNull {
		if err := openai.CheckEnum(at+".detail", detail, "low", "high", "auto"); err != nil {
			return nil, nil, err
		}
		out = append(append(out, `,"detail":`...), detail...)
	}
	return append(out, "}}"...), nil, nil
}
