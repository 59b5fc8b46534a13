package llmkb

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/openai"
)

// message is a chat message as far as retrieval reads it.
type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// lastUserText is the text of the conversation's last user message: what
// the knowledge bases are searched for. Only the messages from the end to
// that one are decoded.
func lastUserText(msgs []json.RawMessage) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		var m message
		if json.Unmarshal(msgs[i], &m) == nil && m.Role == "user" {
			return strings.TrimSpace(contentText(m.Content))
		}
	}
	return ""
}

// contentText is a message content's text: the string, or the text parts.
func contentText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "input_text" {
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// instructions open the passages given to the model.
const instructions = "Answer using the numbered passages below, found in the user's knowledge bases for this question. " +
	"Cite each passage you use with its number in square brackets, such as [1], right after what it supports. " +
	"If the passages do not hold the answer, say so rather than guess."

// passagesText is the system text that gives the model the passages;
// stores names the stores searched and their versions, so that an answer
// cached from it is never served once the documents changed.
func passagesText(hits []passage, stores []string) string {
	var b strings.Builder
	b.WriteString(instructions)
	fmt.Fprintf(&b, "\n\nKnowledge bases searched: %s.", strings.Join(stores, ", "))
	if len(hits) == 0 {
		b.WriteString("\n\nNo passage matched the question.")
	}
	for i, h := range hits {
		fmt.Fprintf(&b, "\n\n[%d] %s\n%s", i+1, h.filename, strings.TrimSpace(h.text))
	}
	return b.String()
}

// inject gives the passages to the model: added to the conversation's
// leading system (or developer) message, as text or as a text part, else
// in a system message of their own before the conversation (one system
// message: some chat templates take no more).
func inject(req *openai.Request, msgs []json.RawMessage, hits []passage, stores []string) error {
	msgs = slices.Clone(msgs)
	text := passagesText(hits, stores)
	var first message
	if len(msgs) > 0 && json.Unmarshal(msgs[0], &first) == nil && (first.Role == "system" || first.Role == "developer") {
		merged, ok, err := addToContent(msgs[0], first.Content, text)
		if err != nil {
			return err
		}
		if ok {
			msgs[0] = merged
			return setMessages(req, msgs)
		}
	}
	sys, _ := json.Marshal(map[string]string{"role": "system", "content": text})
	return setMessages(req, append([]json.RawMessage{sys}, msgs...))
}

// addToContent appends text to a message's content, a string or an array
// of parts; false for another shape.
func addToContent(msg, content json.RawMessage, text string) (json.RawMessage, bool, error) {
	var s string
	if json.Unmarshal(content, &s) == nil {
		v, _ := json.Marshal(s + "\n\n" + text)
		out, err := openai.SetMember(msg, "content", v)
		return out, err == nil, err
	}
	var parts []json.RawMessage
	if json.Unmarshal(content, &parts) != nil {
		return nil, false, nil
	}
	part, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	v, _ := json.Marshal(append(parts, part))
	out, err := openai.SetMember(msg, "content", v)
	return out, err == nil, err
}

// setMessages puts the messages in the request.
func setMessages(req *openai.Request, msgs []json.RawMessage) error {
	out, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	if err := req.Set("messages", out); err != nil {
		return err
	}
	req.Messages, req.MessageCount = out, len(msgs)
	return nil
}
