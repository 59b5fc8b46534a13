package llmmcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/call on the fast path to a Streamable HTTP upstream goes out as
// one POST in the upstream session, and its result comes back as the
// upstream's bytes, without the SDK's client decoding and re-encoding it.
// Sessions that negotiated 2026-07-28 or later (which want per-request
// metadata and headers) take the SDK's client.

// errNotRaw says the call must take the SDK's client.
var errNotRaw = errors.New("not a raw call")

// rawEnvelope is a JSON-RPC response with its result left as bytes.
type rawEnvelope struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rawCall makes the call and returns the upstream's result bytes.
func (u *upstream) rawCall(ctx context.Context, s *mcp.ClientSession, name string, args json.RawMessage) (json.RawMessage, error) {
	ir := s.InitializeResult()
	sid := s.ID()
	if u.hc == nil || u.cfg.Transport != "streamable" || sid == "" || ir == nil || ir.ProtocolVersion >= "2026-07-28" {
		return nil, errNotRaw
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(u.cfg.Timeout))
	defer cancel()
	id := "llmgw-r" + strconv.FormatUint(u.tokens.Add(1), 36)
	nameJSON, _ := json.Marshal(name)
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	body := make([]byte, 0, 96+len(name)+len(args))
	body = append(body, `{"jsonrpc":"2.0","id":"`...)
	body = append(body, id...)
	body = append(body, `","method":"tools/call","params":{"name":`...)
	body = append(body, nameJSON...)
	body = append(body, `,"arguments":`...)
	body = append(body, args...)
	body = append(body, "}}"...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Accept"] = []string{"application/json, text/event-stream"}
	req.Header["Mcp-Protocol-Version"] = []string{ir.ProtocolVersion}
	req.Header["Mcp-Session-Id"] = []string{sid}
	resp, err := u.hc.Do(req)
	if err != nil {
		return nil, u.wrap(ctx, "tools/call "+name, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		_ = s.Close() // the server forgot the session (it restarted): reconnect
		return nil, fmt.Errorf("mcp server %q lost llmgw's session during tools/call %s; llmgw is reconnecting to it, retry shortly", u.cfg.Name, name)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("mcp server %q answered tools/call %s with HTTP %d", u.cfg.Name, name, resp.StatusCode)
	}
	var env rawEnvelope
	if ct := resp.Header.Get("Content-Type"); len(ct) >= 17 && ct[:17] == "text/event-stream" {
		err = readEventResponse(resp.Body, id, &env)
	} else {
		err = json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&env)
	}
	if err != nil {
		return nil, u.wrap(ctx, "tools/call "+name, err)
	}
	if env.Error != nil {
		return nil, fmt.Errorf("mcp server %q: tools/call %s: %s (code %d)", u.cfg.Name, name, env.Error.Message, env.Error.Code)
	}
	if len(env.Result) == 0 {
		return nil, fmt.Errorf("mcp server %q answered tools/call %s without a result", u.cfg.Name, name)
	}
	return env.Result, nil
}

// readEventResponse reads an SSE body until the event that answers id.
// Other events (notifications) are skipped.
func readEventResponse(r io.Reader, id string, env *rawEnvelope) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxBody)
	want := strconv.Quote(id)
	var data []byte
	done := func() bool {
		if len(data) == 0 {
			return false
		}
		*env = rawEnvelope{}
		ok := json.Unmarshal(data, env) == nil && string(env.ID) == want && (env.Result != nil || env.Error != nil)
		data = data[:0]
		return ok
	}
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		switch {
		case len(line) == 0:
			if done() {
				return nil
			}
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		}
	}
	if done() {
		return nil
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the event stream ended without the call's result")
}
