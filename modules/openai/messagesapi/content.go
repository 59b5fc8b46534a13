package messagesapi

import (
	"fmt"
	"slices"

	"github.com/llmgw/llmgw/modules/openai"
)

// writeMessages appends the chat messages of a Messages request's
// messages; first is false after a system message.
func writeMessages(out, msgs []byte, first bool) ([]byte, error) {
	err := openai.EachElement(msgs, func(i int, msg []byte) error {
		at := fmt.Sprintf("messages[%d]", i)
		if openai.KindOf(msg) != openai.KindObject {
			return openai.TypeError(at, `an object such as {"role":"user","content":"…"}`)
		}
		role, content := openai.MemberOf(msg, "role"), openai.MemberOf(msg, "content")
		if len(role) == 0 || openai.KindOf(role) == openai.KindNull {
			return missing(at+".role", at+`.role is missing; use "user" or "assistant"`)
		}
		r := string(openai.Unquote(role))
		if openai.KindOf(role) != openai.KindString || (r != "user" && r != "assistant") {
			return openai.RangeError(at+".role", `"user" or "assistant" (the system prompt goes in system)`)
		}
		switch openai.KindOf(content) {
		case openai.KindString:
			out = comma(out, &first)
			out = append(out, `{"role":`...)
			out = append(out, role...)
			out = append(out, `,"content":`...)
			out = append(out, content...)
			out = append(out, '}')
			return nil
		case openai.KindArray:
		case openai.KindNull:
			return missing(at+".content", at+".content is missing; send a string or an array of content blocks")
		default:
			return openai.TypeError(at+".content", "a string or an array of content blocks")
		}
		var err error
		if r == "user" {
			out, err = userTurn(out, at, content, &first)
		} else {
			out, err = assistantTurn(out, at, content, &first)
		}
		return err
	})
	return out, err
}

// comma separates an array element from the one before it.
func comma(out []byte, first *bool) []byte {
	if *first {
		*first = false
		return out
	}
	return append(out, ',')
}

// userTurn appends a user turn of blocks: a tool message per tool_result,
// then a user message with the other blocks.
func userTurn(out []byte, at string, content []byte, first *bool) ([]byte, error) {
	var parts []byte
	nparts, lone := 0, []byte(nil) // lone: the raw text of a single text block
	err := openai.EachElement(content, func(j int, b []byte) error {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		typ, err := blockType(bat, b)
		if err != nil {
			return err
		}
		if typ == "tool_result" {
			out = comma(out, first)
			out, err = toolResult(out, bat, b)
			return err
		}
		if nparts > 0 {
			parts = append(parts, ',')
		}
		var raw []byte
		parts, raw, err = userPart(parts, bat, typ, b)
		if nparts++; nparts == 1 {
			lone = raw
		} else {
			lone = nil
		}
		return err
	})
	if err != nil || nparts == 0 {
		return out, err
	}
	out = comma(out, first)
	out = append(out, `{"role":"user","content":`...)
	if lone != nil {
		out = append(out, lone...)
	} else {
		out = append(out, '[')
		out = append(out, parts...)
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// userPart appends the chat content part of one block of a user turn; it
// returns the raw text of a text block as lone.
func userPart(parts []byte, at, typ string, b []byte) (out, lone []byte, err error) {
	switch typ {
	case "text":
		raw, err := stringMember(at, b, "text")
		if err != nil {
			return parts, nil, err
		}
		parts = append(parts, `{"type":"text","text":`...)
		parts = append(parts, raw...)
		return append(parts, '}'), raw, nil
	case "image":
		parts, err = imagePart(parts, at, b)
		return parts, nil, err
	case "document":
		parts, err = documentPart(parts, at, b)
		return parts, nil, err
	case "tool_use", "thinking", "redacted_thinking":
		return parts, nil, unsupported(at, typ+" blocks belong to the assistant's turns, not the user's")
	}
	return parts, nil, unsupported(at+".type", fmt.Sprintf("content blocks of type %q are not supported by this model's engine (chat completions); use text, image, document (plain text), tool_use and tool_result", typ))
}

func imagePart(parts []byte, at string, b []byte) ([]byte, error) {
	src := openai.MemberOf(b, "source")
	if openai.KindOf(src) != openai.KindObject {
		return parts, missing(at+".source", at+`.source is missing; send {"type":"base64","media_type":"image/png","data":"…"} or {"type":"url","url":"…"}`)
	}
	sat := at + ".source"
	typ, err := blockType(sat, src)
	if err != nil {
		return parts, err
	}
	switch typ {
	case "base64":
		mt, err := stringMember(sat, src, "media_type")
		if err != nil {
			return parts, err
		}
		if !slices.Contains(messagesImageTypes, string(openai.Unquote(mt))) {
			return parts, openai.RangeError(sat+".media_type", fmt.Sprintf("one of %q", messagesImageTypes))
		}
		data, err := stringMember(sat, src, "data")
		if err != nil {
			return parts, err
		}
		url := make([]byte, 0, len(data)+32)
		url = append(url, "data:"...)
		url = append(url, openai.Unquote(mt)...)
		url = append(url, ";base64,"...)
		url = append(url, openai.Unquote(data)...)
		parts = append(parts, `{"type":"image_url","image_url":{"url":`...)
		parts = openai.AppendJSONString(parts, url)
		return append(parts, "}}"...), nil
	case "url":
		u, err := stringMember(sat, src, "url")
		if err != nil {
			return parts, err
		}
		if err := openai.CheckMediaURL(sat+".url", u); err != nil {
			return parts, err
		}
		parts = append(parts, `{"type":"image_url","image_url":{"url":`...)
		parts = append(parts, u...)
		return append(parts, "}}"...), nil
	}
	return parts, openai.RangeError(sat+".type", `"base64" or "url" (files are not supported by this model's engine)`)
}

// documentPart accepts plain-text documents only: chat engines read no PDF.
func documentPart(parts []byte, at string, b []byte) ([]byte, error) {
	src := openai.MemberOf(b, "source")
	refuse := unsupported(at, "only plain-text documents (source type \"text\") are supported by this model's engine (chat completions); extract the document's text and send it as a text block")
	if openai.KindOf(src) != openai.KindObject {
		return parts, refuse
	}
	if typ, err := blockType(at+".source", src); err != nil || typ != "text" {
		return parts, refuse
	}
	data, err := stringMember(at+".source", src, "data")
	if err != nil {
		return parts, err
	}
	parts = append(parts, `{"type":"text","text":`...)
	parts = append(parts, data...)
	return append(parts, '}'), nil
}

// toolResult appends the tool message of a tool_result block.
func toolResult(out []byte, at string, b []byte) ([]byte, error) {
	id, err := stringMember(at, b, "tool_use_id")
	if err != nil {
		return out, err
	}
	isError := string(openai.MemberOf(b, "is_error")) == "true"
	content := openai.MemberOf(b, "content")
	out = append(out, `{"role":"tool","tool_call_id":`...)
	out = append(out, id...)
	out = append(out, `,"content":`...)
	switch openai.KindOf(content) {
	case openai.KindString:
		if !isError {
			out = append(out, content...)
			return append(out, '}'), nil
		}
		text := append([]byte("Error: "), openai.Unquote(content)...)
		out = openai.AppendJSONString(out, text)
		return append(out, '}'), nil
	case openai.KindNull:
		content = []byte("[]")
	case openai.KindArray:
	default:
		return out, openai.TypeError(at+".content", "a string or an array of text blocks")
	}
	var text []byte
	if isError {
		text = []byte("Error: ")
	}
	n := 0
	err = openai.EachElement(content, func(k int, blk []byte) error {
		t, err := textBlock(fmt.Sprintf("%s.content[%d]", at, k), blk)
		if err != nil {
			if e, ok := err.(*openai.Error); ok && e.Code == "invalid_value" {
				return unsupported(fmt.Sprintf("%s.content[%d]", at, k), "tool results can carry only text for this model's engine (chat completions tool messages are text); send images in a user block")
			}
			return err
		}
		if n > 0 {
			text = append(text, '\n')
		}
		text, n = append(text, t...), n+1
		return nil
	})
	if err != nil {
		return out, err
	}
	out = openai.AppendJSONString(out, text)
	return append(out, '}'), nil
}

// assistantTurn appends an assistant message: its text blocks joined as
// content, its tool_use blocks as tool_calls.
func assistantTurn(out []byte, at string, content []byte, first *bool) ([]byte, error) {
	var texts [][]byte
	var calls []byte
	err := openai.EachElement(content, func(j int, b []byte) error {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		typ, err := blockType(bat, b)
		if err != nil {
			return err
		}
		switch typ {
		case "text":
			raw, err := stringMember(bat, b, "text")
			texts = append(texts, raw)
			return err
		case "tool_use":
			if len(calls) > 0 {
				calls = append(calls, ',')
			}
			calls, err = toolCall(calls, bat, b)
			return err
		case "thinking", "redacted_thinking":
			return nil // chat engines take no reasoning back
		case "tool_result":
			return unsupported(bat, "tool_result blocks belong to the user's turns, not the assistant's")
		}
		return unsupported(bat+".type", fmt.Sprintf("content blocks of type %q are not supported in an assistant turn by this model's engine (chat completions); use text and tool_use", typ))
	})
	if err != nil {
		return out, err
	}
	out = comma(out, first)
	out = append(out, `{"role":"assistant","content":`...)
	switch len(texts) {
	case 0:
		out = append(out, "null"...)
	case 1:
		out = append(out, texts[0]...)
	default:
		var joined []byte
		for _, t := range texts {
			joined = append(joined, openai.Unquote(t)...)
		}
		out = openai.AppendJSONString(out, joined)
	}
	if len(calls) > 0 {
		out = append(out, `,"tool_calls":[`...)
		out = append(out, calls...)
		out = append(out, ']')
	}
	return append(out, '}'), nil
}

// toolCall appends the chat tool call of a tool_use block: its input, as
// sent, is the arguments string.
func toolCall(out []byte, at string, b []byte) ([]byte, error) {
	id, err := stringMember(at, b, "id")
	if err != nil {
		return out, err
	}
	name, err := stringMember(at, b, "name")
	if err != nil {
		return out, err
	}
	input := openai.MemberOf(b, "input")
	if openai.KindOf(input) != openai.KindObject {
		return out, openai.TypeError(at+".input", "an object (the tool's arguments)")
	}
	out = append(out, `{"id":`...)
	out = append(out, id...)
	out = append(out, `,"type":"function","function":{"name":`...)
	out = append(out, name...)
	out = append(out, `,"arguments":`...)
	out = openai.AppendJSONString(out, input)
	return append(out, "}}"...), nil
}

// writeTools appends tools, tool_choice and parallel_tool_calls.
func (m *messagesReq) writeTools(out []byte) ([]byte, error) {
	if len(m.tools) == 0 || openai.CountElements(m.tools) == 0 {
		return out, nil
	}
	out = append(out, `,"tools":[`...)
	err := openai.EachElement(m.tools, func(i int, t []byte) error {
		at := fmt.Sprintf("tools[%d]", i)
		if openai.KindOf(t) != openai.KindObject {
			return openai.TypeError(at, `an object such as {"name":"…","input_schema":{"type":"object"}}`)
		}
		if typ := openai.MemberOf(t, "type"); len(typ) > 0 && openai.KindOf(typ) != openai.KindNull && string(typ) != `"custom"` {
			return unsupported(at+".type", fmt.Sprintf("Anthropic's own tools (%s) are not supported by this model's engine (chat completions); define the tool with name, description and input_schema", typ))
		}
		name, err := stringMember(at, t, "name")
		if err != nil {
			return err
		}
		schema := openai.MemberOf(t, "input_schema")
		if openai.KindOf(schema) != openai.KindObject {
			return missing(at+".input_schema", at+".input_schema is missing; describe the tool's input as a JSON schema object")
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, `{"type":"function","function":{"name":`...)
		out = append(out, name...)
		if d := openai.MemberOf(t, "description"); openai.KindOf(d) == openai.KindString {
			out = append(out, `,"description":`...)
			out = append(out, d...)
		}
		out = append(out, `,"parameters":`...)
		out = append(out, schema...)
		out = append(out, "}}"...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	out = append(out, ']')
	return m.writeToolChoice(out)
}

func (m *messagesReq) writeToolChoice(out []byte) ([]byte, error) {
	if len(m.toolChoice) == 0 {
		return out, nil
	}
	typ, err := blockType("tool_choice", m.toolChoice)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "auto", "none":
		out = append(out, `,"tool_choice":"`...)
		out = append(out, typ...)
		out = append(out, '"')
	case "any":
		out = append(out, `,"tool_choice":"required"`...)
	case "tool":
		name, err := stringMember("tool_choice", m.toolChoice, "name")
		if err != nil {
			return nil, err
		}
		out = append(out, `,"tool_choice":{"type":"function","function":{"name":`...)
		out = append(out, name...)
		out = append(out, "}}"...)
	default:
		return nil, openai.RangeError("tool_choice.type", `"auto", "any", "tool" or "none"`)
	}
	if string(openai.MemberOf(m.toolChoice, "disable_parallel_tool_use")) == "true" {
		out = append(out, `,"parallel_tool_calls":false`...)
	}
	return out, nil
}

// writeThinking maps an extended-thinking budget to reasoning_effort.
func (m *messagesReq) writeThinking(out []byte) ([]byte, error) {
	if len(m.thinking) == 0 {
		return out, nil
	}
	typ, err := blockType("thinking", m.thinking)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "disabled", "adaptive":
		return out, nil
	case "enabled":
	default:
		return nil, openai.RangeError("thinking.type", `"enabled", "disabled" or "adaptive"`)
	}
	b := openai.MemberOf(m.thinking, "budget_tokens")
	if len(b) == 0 {
		return nil, missing("thinking.budget_tokens", "thinking.budget_tokens is missing; set how many tokens the model may think (at least 1024)")
	}
	n, err := openai.ReadInt("thinking.budget_tokens", b, 1024, 1<<31)
	if err != nil {
		return nil, err
	}
	if m.maxTokens > 0 && n >= m.maxTokens {
		return nil, openai.RangeError("thinking.budget_tokens", "less than max_tokens")
	}
	effort := "high"
	switch {
	case n < 4096:
		effort = "low"
	case n < 16384:
		effort = "medium"
	}
	return append(out, `,"reasoning_effort":"`+effort+`"`...), nil
}
