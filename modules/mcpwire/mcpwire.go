// Package mcpwire reads the JSON-RPC messages a client POSTs to an MCP
// server over the Streamable HTTP transport, for the llm_* handlers that
// act on tool calls before llm_mcp serves them (llm_quota counts them,
// llm_guardrails checks their arguments and results). The body is read
// once per request, kept for every handler, and put back for the next.
package mcpwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// MaxBodyBytes bounds an MCP request body.
const MaxBodyBytes = 16 << 20

// Message is one JSON-RPC message of a request body.
type Message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// IsToolCall says whether the message calls a tool.
func (m *Message) IsToolCall() bool { return m.Method == "tools/call" && len(m.ID) > 0 }

// ToolParams are the params of tools/call.
type ToolParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Tool returns a tools/call message's tool name and arguments.
func (m *Message) Tool() (ToolParams, error) {
	var p ToolParams
	err := json.Unmarshal(m.Params, &p)
	return p, err
}

// Body is an MCP request body: one message or a batch.
type Body struct {
	Raw      []byte
	Messages []Message
	Batch    bool
}

// ToolCalls counts the body's tool calls.
func (b *Body) ToolCalls() int {
	n := 0
	for i := range b.Messages {
		if b.Messages[i].IsToolCall() {
			n++
		}
	}
	return n
}

// Encode makes the body from its messages again, after a handler changed
// some (their Params), and puts it back on r for the handlers after it.
func (b *Body) Encode(r *http.Request) error {
	var v any = b.Messages
	if !b.Batch && len(b.Messages) == 1 {
		v = &b.Messages[0]
	}
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return err
	}
	raw := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b.Raw = raw
	r.Body = io.NopCloser(bytes.NewReader(raw))
	r.ContentLength = int64(len(raw))
	return nil
}

// WriteErrors answers every request of the body (the messages with an id)
// with a JSON-RPC error: code, the message msg gives for the request's
// id, and data when set. The HTTP status is 200, as for any JSON-RPC
// answer; a body of notifications only gets 202 and no content.
func (b *Body) WriteErrors(w http.ResponseWriter, code int, msg func(id json.RawMessage) string, data map[string]any) {
	type rpcErr struct {
		Code    int            `json:"code"`
		Message string         `json:"message"`
		Data    map[string]any `json:"data,omitempty"`
	}
	type reply struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcErr          `json:"error"`
	}
	var replies []reply
	for _, m := range b.Messages {
		if len(m.ID) > 0 {
			replies = append(replies, reply{"2.0", m.ID, rpcErr{code, msg(m.ID), data}})
		}
	}
	if len(replies) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var v any = replies
	if !b.Batch {
		v = replies[0]
	}
	out, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

const varKey = "llm.mcp"

type loaded struct {
	b   *Body
	err error
}

// ErrNotMCP is Read's answer for a request that is not an MCP POST.
var ErrNotMCP = errors.New("not an MCP request")

// Read returns the JSON-RPC messages of an MCP POST: a POST whose body is
// JSON with a "jsonrpc" member. The body is put back on r. Later calls
// return the same Body; other requests get ErrNotMCP.
func Read(r *http.Request) (*Body, error) {
	if v, ok := caddyhttp.GetVar(r.Context(), varKey).(loaded); ok {
		return v.b, v.err
	}
	b, err := read(r)
	caddyhttp.SetVar(r.Context(), varKey, loaded{b, err})
	return b, err
}

func read(r *http.Request) (*Body, error) {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return nil, ErrNotMCP
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		return nil, ErrNotMCP
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, ErrNotMCP // llm_mcp refuses it
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(raw))
	if err != nil || len(raw) > MaxBodyBytes || !bytes.Contains(raw, []byte(`"jsonrpc"`)) {
		return nil, ErrNotMCP
	}
	b := &Body{Raw: raw}
	t := bytes.TrimLeft(raw, " \t\r\n")
	switch {
	case len(t) > 0 && t[0] == '[':
		b.Batch = true
		err = json.Unmarshal(raw, &b.Messages)
	case len(t) > 0 && t[0] == '{':
		b.Messages = make([]Message, 1)
		err = json.Unmarshal(raw, &b.Messages[0])
	default:
		return nil, ErrNotMCP
	}
	if err != nil {
		return nil, ErrNotMCP // llm_mcp answers the parse error
	}
	return b, nil
}
