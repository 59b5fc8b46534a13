package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// The members with a shape of their own. Each checks its value where it
// lies in the body and keeps a slice of it, never a copy.

func (p *parser) model(name string, v []byte) error {
	if KindOf(v) != KindString {
		return TypeError(name, "a string (a model's name, as GET /v1/models lists them)")
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return TypeError(name, "a string")
	}
	p.r.Model = s
	return nil
}

func (p *parser) stream(name string, v []byte) error {
	if KindOf(v) != KindBool {
		return TypeError(name, "a boolean")
	}
	p.r.Stream = v[0] == 't'
	return nil
}

func (p *parser) streamOptions(name string, v []byte) error {
	if KindOf(v) != KindObject {
		return TypeError(name, "an object such as {\"include_usage\":true}")
	}
	p.r.StreamOptions, p.r.IncludeUsage = v, false
	return EachMember(v, func(key, val []byte) error {
		if string(key) != "include_usage" {
			return nil
		}
		switch KindOf(val) {
		case KindBool:
			p.r.IncludeUsage = val[0] == 't'
		case KindNull:
			p.r.IncludeUsage = false
		default:
			return TypeError(name+".include_usage", "a boolean")
		}
		return nil
	})
}

func (p *parser) maxTokensField(name string, v []byte) error {
	n, err := ReadInt(name, v, 1, math.MaxInt64)
	p.maxTokens, p.hasMaxTok = n, err == nil
	return err
}

func (p *parser) maxCompletionTokens(name string, v []byte) error {
	n, err := ReadInt(name, v, 1, math.MaxInt64)
	p.maxCompletion, p.hasMaxComplete = n, err == nil
	return err
}

// messages checks each message: an object with a string role, and a
// content that is a string, an array of content parts or null.
func (p *parser) messages(name string, v []byte) error {
	if KindOf(v) != KindArray {
		return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_messages", Param: name,
			Message: "messages must be a non-empty array of message objects"}
	}
	count := 0
	err := EachElement(v, func(i int, m []byte) error {
		count++
		return checkMessage(fmt.Sprintf("%s[%d]", name, i), m)
	})
	if err != nil {
		return err
	}
	p.r.Messages, p.r.MessageCount = v, count
	return nil
}

func checkMessage(at string, m []byte) error {
	if KindOf(m) != KindObject {
		return TypeError(at, "an object with role and content")
	}
	hasRole := false
	err := EachMember(m, func(key, v []byte) error {
		k := KindOf(v)
		switch string(key) {
		case "role":
			if k != KindString {
				return TypeError(at+".role", "a string such as \"user\"")
			}
			hasRole = true
		case "content":
			if k == KindArray {
				return EachElement(v, func(j int, part []byte) error {
					return checkPart(fmt.Sprintf("%s.content[%d]", at, j), part)
				})
			}
			if k != KindString && k != KindNull {
				return TypeError(at+".content", "a string or an array of content parts")
			}
		case "name", "tool_call_id":
			if k != KindString && k != KindNull {
				return TypeError(at+"."+string(key), "a string")
			}
		case "tool_calls":
			if k == KindArray {
				return EachElement(v, func(j int, c []byte) error {
					if KindOf(c) != KindObject {
						return TypeError(fmt.Sprintf("%s.tool_calls[%d]", at, j), "an object")
					}
					return nil
				})
			}
			if k != KindNull {
				return TypeError(at+".tool_calls", "an array of tool calls")
			}
		}
		return nil
	})
	if err == nil && !hasRole {
		return &Error{Status: 400, Type: "invalid_request_error", Code: "missing_required_parameter", Param: at + ".role",
			Message: at + ".role is missing; every message needs a role such as \"user\""}
	}
	return err
}

// checkPart checks one content part: an object with a string type.
func checkPart(at string, part []byte) error {
	if KindOf(part) != KindObject {
		return TypeError(at, "an object such as {\"type\":\"text\",\"text\":\"…\"}")
	}
	hasType := false
	err := EachMember(part, func(key, v []byte) error {
		switch k := string(key); k {
		case "type":
			if KindOf(v) != KindString {
				return TypeError(at+".type", "a string such as \"text\"")
			}
			hasType = true
		case "image_url", "video_url", "audio_url", "input_image":
			return checkPartURL(at+"."+k, v)
		}
		return nil
	})
	if err == nil && !hasType {
		return &Error{Status: 400, Type: "invalid_request_error", Code: "missing_required_parameter", Param: at + ".type",
			Message: at + ".type is missing; every content part needs a type such as \"text\""}
	}
	return err
}

// checkPartURL checks a media part's URL: {"url":"…"}, or the URL itself
// as some engines take it.
func checkPartURL(at string, v []byte) error {
	switch KindOf(v) {
	case KindString:
		return CheckMediaURL(at, v)
	case KindObject:
		if u := MemberOf(v, "url"); KindOf(u) == KindString {
			return CheckMediaURL(at+".url", u)
		}
	}
	return nil
}

// stop is a string or an array of at most MaxStop strings.
func (p *parser) stop(name string, v []byte) error {
	want := fmt.Sprintf("a string or an array of at most %d strings", MaxStop)
	switch KindOf(v) {
	case KindString:
		return nil
	case KindArray:
	default:
		return TypeError(name, want)
	}
	n := 0
	err := EachElement(v, func(i int, s []byte) error {
		n++
		if KindOf(s) != KindString {
			return TypeError(fmt.Sprintf("%s[%d]", name, i), "a string")
		}
		return nil
	})
	if err == nil && n > MaxStop {
		return RangeError(name, want)
	}
	return err
}

// tools is an array of at most MaxTools tool objects; a function tool
// names its function.
func (p *parser) tools(name string, v []byte) error {
	if KindOf(v) != KindArray {
		return TypeError(name, "an array of tool objects")
	}
	n := 0
	err := EachElement(v, func(i int, t []byte) error {
		n++
		return checkTool(fmt.Sprintf("%s[%d]", name, i), t)
	})
	if err == nil && n > MaxTools {
		return RangeError(name, fmt.Sprintf("an array of at most %d tools (it has %d)", MaxTools, n))
	}
	p.r.ToolCount, p.r.Tools = n, v
	return err
}

func checkTool(at string, t []byte) error {
	if KindOf(t) != KindObject {
		return TypeError(at, "an object such as {\"type\":\"function\",\"function\":{\"name\":\"…\"}}")
	}
	return EachMember(t, func(key, v []byte) error {
		switch string(key) {
		case "type":
			if KindOf(v) != KindString {
				return TypeError(at+".type", "a string such as \"function\"")
			}
		case "function":
			if KindOf(v) != KindObject {
				return TypeError(at+".function", "an object with a name")
			}
			return EachMember(v, func(fk, fv []byte) error {
				if string(fk) == "name" && KindOf(fv) != KindString {
					return TypeError(at+".function.name", "a string")
				}
				return nil
			})
		}
		return nil
	})
}

// prompt is a completions prompt: a string, or an array of strings, of
// token IDs or of arrays of token IDs.
func (p *parser) prompt(name string, v []byte) error {
	n, err := batch(name, v, "a string, an array of strings or an array of token arrays")
	p.r.Prompt, p.r.InputCount = v, n
	return err
}

// input is an embeddings input, shaped like a prompt.
func (p *parser) input(name string, v []byte) error {
	n, err := batch(name, v, "a string, an array of strings or an array of token arrays")
	p.r.Input, p.r.InputCount = v, n
	return err
}

// batch checks a string or an array of at most MaxInputs items, all
// strings, all integers, or all arrays of integers, and counts the items.
func batch(name string, v []byte, want string) (int, error) {
	switch KindOf(v) {
	case KindString:
		return 1, nil
	case KindArray:
	default:
		return 0, TypeError(name, want)
	}
	first, n := KindNull, 0
	err := EachElement(v, func(i int, it []byte) error {
		n++
		k := KindOf(it)
		if i == 0 {
			first = k
		}
		at := fmt.Sprintf("%s[%d]", name, i)
		switch {
		case k != first || (k != KindString && k != KindNumber && k != KindArray):
			return TypeError(at, "of the same kind as "+name+"[0]: all strings, all token IDs or all token arrays")
		case k == KindNumber:
			_, err := ReadInt(at, it, 0, math.MaxInt32)
			return err
		case k == KindArray:
			return EachElement(it, func(j int, tok []byte) error {
				_, err := ReadInt(fmt.Sprintf("%s[%d]", at, j), tok, 0, math.MaxInt32)
				return err
			})
		}
		return nil
	})
	if first == KindNumber {
		return 1, err // one prompt of token IDs
	}
	if err == nil && n > MaxInputs {
		return n, RangeError(name, fmt.Sprintf("an array of at most %d items (it has %d)", MaxInputs, n))
	}
	return n, err
}

// ToolCallFields reads a chat tool call (or its delta): its index, and
// its id, function name and arguments as they lie in it (nil if absent).
func ToolCallFields(tc []byte) (index int, id, name, args []byte) {
	_ = EachMember(tc, func(k, v []byte) error {
		switch string(k) {
		case "index":
			index, _ = strconv.Atoi(string(v))
		case "id":
			id = v
		case "function":
			_ = EachMember(v, func(fk, fv []byte) error {
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
	return index, id, name, args
}
