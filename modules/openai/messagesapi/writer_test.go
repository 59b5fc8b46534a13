package messagesapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/openai"
)

// writeChunked writes b to w in random pieces, flushing now and then, as
// a handler replaying or restoring an answer may.
func writeChunked(w http.ResponseWriter, b []byte, rng *rand.Rand) {
	rc := http.NewResponseController(w)
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 1+rng.IntN(64)))
		_, _ = w.Write(b[:n])
		b = b[n:]
		if rng.IntN(3) == 0 {
			_ = rc.Flush()
		}
	}
}

// writeWhole writes a whole chat answer as the router does: the length,
// the status, one write.
func writeWhole(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

const chatWhole = `{"id":"chatcmpl-7","object":"chat.completion","created":1,"model":"engine-model",
 "choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"let me think","content":"Sure, caf\u00e9 \"x\".",
   "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Par\\u00eds\\n\"}"}},
                 {"id":"call_2","type":"function","function":{"name":"noargs","arguments":""}}]},
   "finish_reason":"tool_calls"}],
 "usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42,"prompt_tokens_details":{"cached_tokens":10}}}`

func TestMessagesWriterWhole(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			turn := &messagesTurn{model: "claude-x"}
			rec := httptest.NewRecorder()
			w := turn.Writer(rec)
			if chunked {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(200)
				writeChunked(w, []byte(chatWhole), rand.New(rand.NewPCG(1, 2)))
			} else {
				writeWhole(w, 200, []byte(chatWhole))
			}
			if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(rec.Body.Len()); got != want {
				t.Errorf("got Content-Length %s, want %s", got, want)
			}
			var m anthropic.Message
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
				t.Fatalf("the official type does not decode %s: %v", rec.Body, err)
			}
			if m.ID != "msg_chatcmpl-7" || m.Model != "claude-x" || m.Role != "assistant" || m.StopReason != "tool_use" {
				t.Errorf("got id %q model %q role %q stop %q", m.ID, m.Model, m.Role, m.StopReason)
			}
			if len(m.Content) != 4 {
				t.Fatalf("got %d blocks, want 4: %s", len(m.Content), rec.Body)
			}
			if c := m.Content[0]; c.Type != "thinking" || c.Thinking != "let me think" {
				t.Errorf("block 0: got %+v", c)
			}
			if c := m.Content[1]; c.Type != "text" || c.Text != "Sure, café \"x\"." {
				t.Errorf("block 1: got %q %q", c.Type, c.Text)
			}
			if c := m.Content[2]; c.Type != "tool_use" || c.ID != "call_1" || c.Name != "get_weather" || string(c.Input) != "{\"city\": \"Par\\u00eds\\n\"}" {
				t.Errorf("block 2: got %q %q %q %s", c.Type, c.ID, c.Name, c.Input)
			}
			if c := m.Content[3]; c.Type != "tool_use" || string(c.Input) != "{}" {
				t.Errorf("block 3: got %q %s", c.Type, c.Input)
			}
			u := m.Usage
			if u.InputTokens != 20 || u.CacheReadInputTokens != 10 || u.OutputTokens != 12 || u.CacheCreationInputTokens != 0 {
				t.Errorf("got usage %+v, want input 20, cache read 10, output 12", u)
			}
		})
	}
}

func TestMessagesWriterStopReasons(t *testing.T) {
	for _, tc := range []struct{ finish, extra, want, seq string }{
		{"stop", "", "end_turn", ""},
		{"length", "", "max_tokens", ""},
		{"content_filter", "", "refusal", ""},
		{"stop", `,"stop_reason":"END"`, "stop_sequence", "END"},
		{"stop", `,"stop_reason":"other"`, "end_turn", ""},
	} {
		body := `{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"` + tc.finish + `"` + tc.extra + `}],"usage":{"prompt_tokens":1,"completion_tokens":1}}`
		rec := httptest.NewRecorder()
		writeWhole((&messagesTurn{model: "m", stops: []string{"END"}}).Writer(rec), 200, []byte(body))
		var m anthropic.Message
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		if string(m.StopReason) != tc.want || m.StopSequence != tc.seq {
			t.Errorf("finish %s%s: got %q %q, want %q %q", tc.finish, tc.extra, m.StopReason, m.StopSequence, tc.want, tc.seq)
		}
	}
}

func TestMessagesWriterCountTokens(t *testing.T) {
	rec := httptest.NewRecorder()
	writeWhole((&messagesTurn{model: "m", countOnly: true}).Writer(rec), 200,
		[]byte(`{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":"length"}],"usage":{"prompt_tokens":17,"completion_tokens":1,"total_tokens":18}}`))
	var c anthropic.MessageTokensCount
	if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil || c.InputTokens != 17 {
		t.Errorf("got %s (%v), want input_tokens 17", rec.Body, err)
	}
}

func TestMessagesWriterErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		typ    string
	}{
		{400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
		{404, "not_found_error"}, {413, "request_too_large"}, {429, "rate_limit_error"},
		{500, "api_error"}, {502, "api_error"}, {503, "overloaded_error"}, {504, "timeout_error"},
	} {
		for _, w := range []func(http.ResponseWriter) http.ResponseWriter{
			(&messagesTurn{model: "m"}).Writer, newMessagesErrorWriter,
		} {
			rec := httptest.NewRecorder()
			e := &openai.Error{Status: tc.status, Type: "some_type", Code: "some_code", Message: "what went wrong"}
			e.Write(w(rec))
			var got struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if rec.Code != tc.status || got.Type != "error" || got.Error.Type != tc.typ || got.Error.Message != "what went wrong" {
				t.Errorf("status %d: got %d %s", tc.status, rec.Code, rec.Body)
			}
			if cl := rec.Header().Get("Content-Length"); cl != strconv.Itoa(rec.Body.Len()) {
				t.Errorf("status %d: got Content-Length %s for %d bytes", tc.status, cl, rec.Body.Len())
			}
		}
	}
	// Engines' own error shapes keep their message.
	for _, body := range []string{`{"error":"model is loading"}`, `{"detail":"model is loading"}`, `{"object":"error","message":"model is loading"}`} {
		rec := httptest.NewRecorder()
		writeWhole((&messagesTurn{model: "m"}).Writer(rec), 503, []byte(body))
		if want := `{"type":"error","error":{"type":"overloaded_error","message":"model is loading"}}`; rec.Body.String() != want {
			t.Errorf("%s: got %s, want %s", body, rec.Body, want)
		}
	}
	// A successful answer passes an error-only writer unchanged.
	rec := httptest.NewRecorder()
	writeWhole(newMessagesErrorWriter(rec), 200, []byte(`{"ok":true}`))
	if rec.Body.String() != `{"ok":true}` {
		t.Errorf("got %s", rec.Body)
	}
}

// chatScript is a chat stream to generate: reasoning, text and tool calls
// in fragments, as an engine sends them.
type chatScript struct {
	reasoning, text []string
	calls           []scriptCall
	finish          string
	prompt, output  int64
}

type scriptCall struct {
	id, name string
	args     []string
}

func (s *chatScript) joined() (reasoning, text string, args []string) {
	reasoning, text = strings.Join(s.reasoning, ""), strings.Join(s.text, "")
	for _, c := range s.calls {
		args = append(args, strings.Join(c.args, ""))
	}
	return
}

// encodeFragment writes s as a JSON string, escaping some characters as
// \uXXXX at random: the translation must pass such bytes through as they
// are.
func encodeFragment(s string, rng *rand.Rand) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || (r > 0x7f && r < 0x10000 && rng.IntN(2) == 0):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func (s *chatScript) sse(rng *rand.Rand) []byte {
	var b bytes.Buffer
	ev := func(delta string) {
		fmt.Fprintf(&b, `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"e","choices":[{"index":0,"delta":%s,"finish_reason":null}]}`+"\n\n", delta)
	}
	ev(`{"role":"assistant","content":""}`)
	for _, f := range s.reasoning {
		ev(`{"reasoning_content":` + encodeFragment(f, rng) + `}`)
	}
	for _, f := range s.text {
		ev(`{"content":` + encodeFragment(f, rng) + `}`)
	}
	for i, c := range s.calls {
		ev(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]}`, i, c.id, c.name))
		for _, f := range c.args {
			ev(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, encodeFragment(f, rng)))
		}
	}
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":%q}]}`+"\n\n", s.finish)
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n", s.prompt, s.output, s.prompt+s.output)
	b.WriteString("data: [DONE]\n\n")
	return b.Bytes()
}

var pieces = []string{"a", "é", "€", "𝄞", "日本", " ", "\n", `"`, `\`, "x\ty", "ok", "\u2028"}

// fragments splits s into random pieces at rune boundaries.
func fragments(s string, rng *rand.Rand) []string {
	var out []string
	for len(s) > 0 {
		n := 1 + rng.IntN(len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func randomText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randomScript(rng *rand.Rand) *chatScript {
	s := &chatScript{finish: "stop", prompt: rng.Int64N(5000), output: rng.Int64N(5000)}
	if rng.IntN(2) == 0 {
		s.reasoning = fragments(randomText(rng, 1+rng.IntN(20)), rng)
	}
	if rng.IntN(4) > 0 {
		s.text = fragments(randomText(rng, 1+rng.IntN(40)), rng)
	}
	for i := range rng.IntN(4) {
		args, _ := json.Marshal(map[string]any{"s": randomText(rng, rng.IntN(15)), "n": []int{i, 2}})
		s.calls = append(s.calls, scriptCall{id: fmt.Sprintf("call_%d", i), name: fmt.Sprintf("tool_%d", i), args: fragments(string(args), rng)})
		s.finish = "tool_calls"
	}
	return s
}

// sseEvent is one event of a Messages stream as written.
type sseEvent struct {
	name string
	data []byte
}

func readEvents(t *testing.T, b []byte) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, raw := range strings.Split(strings.TrimSuffix(string(b), "\n\n"), "\n\n") {
		name, data, ok := strings.Cut(raw, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") || !json.Valid([]byte(data)) {
			t.Fatalf("malformed event %q in\n%s", raw, b)
		}
		var typ struct{ Type string }
		_ = json.Unmarshal([]byte(data), &typ)
		if typ.Type != name[7:] {
			t.Fatalf("event %s carries type %s", name[7:], typ.Type)
		}
		out = append(out, sseEvent{name[7:], []byte(data)})
	}
	return out
}

// checkStream checks a Messages stream against the script it came from:
// the order of events, each block's text and arguments byte for byte,
// and the usage; and that the official client accumulates it.
func checkStream(t *testing.T, s *chatScript, out []byte) {
	t.Helper()
	events := readEvents(t, out)
	type blk struct {
		typ    string
		text   []byte
		closed bool
	}
	var blocks []*blk
	var stopReason string
	var usage struct{ InputTokens, OutputTokens int64 }
	for i, e := range events {
		var d struct {
			Index        int
			ContentBlock struct{ Type string } `json:"content_block"`
			Delta        struct {
				Type, Text, Thinking string
				PartialJSON          string `json:"partial_json"`
				StopReason           string `json:"stop_reason"`
			}
			Usage struct {
				InputTokens  int64 `json:"input_tokens"`
				OutputTokens int64 `json:"output_tokens"`
			}
		}
		if err := json.Unmarshal(e.data, &d); err != nil {
			t.Fatal(err)
		}
		switch {
		case i == 0 && e.name != "message_start", i == 1 && e.name != "ping", i == len(events)-1 && e.name != "message_stop":
			t.Fatalf("event %d is %s", i, e.name)
		case e.name == "content_block_start":
			if d.Index != len(blocks) || (len(blocks) > 0 && !blocks[len(blocks)-1].closed) {
				t.Fatalf("block %d starts after %d blocks, the last open", d.Index, len(blocks))
			}
			blocks = append(blocks, &blk{typ: d.ContentBlock.Type})
		case e.name == "content_block_delta":
			if d.Index != len(blocks)-1 || blocks[d.Index].closed {
				t.Fatalf("delta for block %d of %d", d.Index, len(blocks))
			}
			blocks[d.Index].text = append(blocks[d.Index].text, d.Delta.Text+d.Delta.Thinking+d.Delta.PartialJSON...)
		case e.name == "content_block_stop":
			blocks[d.Index].closed = true
		case e.name == "message_delta":
			if len(blocks) > 0 && !blocks[len(blocks)-1].closed {
				t.Fatalf("message_delta with a block open")
			}
			stopReason = d.Delta.StopReason
			usage.InputTokens, usage.OutputTokens = d.Usage.InputTokens, d.Usage.OutputTokens
		}
	}
	reasoning, text, args := s.joined()
	var want []blk
	if reasoning != "" {
		want = append(want, blk{typ: "thinking", text: []byte(reasoning)})
	}
	if text != "" {
		want = append(want, blk{typ: "text", text: []byte(text)})
	}
	for _, a := range args {
		want = append(want, blk{typ: "tool_use", text: []byte(a)})
	}
	if len(blocks) != len(want) {
		t.Fatalf("got %d blocks, want %d:\n%s", len(blocks), len(want), out)
	}
	for i, b := range blocks {
		if b.typ != want[i].typ || !bytes.Equal(b.text, want[i].text) {
			t.Errorf("block %d: got %s %q, want %s %q", i, b.typ, b.text, want[i].typ, want[i].text)
		}
	}
	wantStop := map[string]string{"stop": "end_turn", "tool_calls": "tool_use"}[s.finish]
	if stopReason != wantStop || usage.InputTokens != s.prompt || usage.OutputTokens != s.output {
		t.Errorf("got stop %q usage %+v, want %q %d/%d", stopReason, usage, wantStop, s.prompt, s.output)
	}
	m := accumulate(t, out)
	if int64(len(m.Content)) != int64(len(want)) || m.Usage.InputTokens != s.prompt || m.Usage.OutputTokens != s.output || string(m.StopReason) != wantStop {
		t.Errorf("the official client accumulated %d blocks, usage %d/%d, stop %q", len(m.Content), m.Usage.InputTokens, m.Usage.OutputTokens, m.StopReason)
	}
	for i, c := range m.Content {
		got := c.Text + c.Thinking + string(c.Input)
		if c.Type == "tool_use" && !json.Valid(want[i].text) {
			continue
		}
		if got != string(want[i].text) {
			t.Errorf("the official client's block %d: got %q, want %q", i, got, want[i].text)
		}
	}
}

// accumulate decodes a Messages stream with the official client's types
// and accumulator.
func accumulate(t *testing.T, out []byte) anthropic.Message {
	t.Helper()
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(out))}
	stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	var m anthropic.Message
	for stream.Next() {
		if err := m.Accumulate(stream.Current()); err != nil {
			t.Fatalf("accumulating: %v", err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("the official client's stream: %v", err)
	}
	return m
}

// Chat streams in random chunkings: the Messages stream carries the same
// text, reasoning and arguments, byte for byte, in a valid order.
func TestMessagesStreamProperty(t *testing.T) {
	for i := range 300 {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		s := randomScript(rng)
		rec := httptest.NewRecorder()
		w := (&messagesTurn{model: "claude-x", stream: true}).Writer(rec)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		writeChunked(w, s.sse(rng), rng)
		checkStream(t, s, rec.Body.Bytes())
		if t.Failed() {
			t.Fatalf("seed %d", i)
		}
	}
}

func FuzzMessagesStream(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(99), uint64(5))
	f.Fuzz(func(t *testing.T, seed, chunking uint64) {
		s := randomScript(rand.New(rand.NewPCG(seed, 1)))
		rng := rand.New(rand.NewPCG(chunking, 3))
		rec := httptest.NewRecorder()
		w := (&messagesTurn{model: "m", stream: true}).Writer(rec)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		writeChunked(w, s.sse(rng), rng)
		checkStream(t, s, rec.Body.Bytes())
	})
}

// A whole answer to a client that asked for a stream is sent as events.
func TestMessagesWriterWholeAsStream(t *testing.T) {
	rec := httptest.NewRecorder()
	writeWhole((&messagesTurn{model: "claude-x", stream: true}).Writer(rec), 200, []byte(chatWhole))
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("got Content-Type %q", ct)
	}
	m := accumulate(t, rec.Body.Bytes())
	if len(m.Content) != 4 || m.Content[1].Text != "Sure, café \"x\"." || string(m.Content[2].Input) != "{\"city\": \"Par\\u00eds\\n\"}" || m.StopReason != "tool_use" {
		t.Errorf("got %+v", m)
	}
}

// An error event mid-stream ends the stream with Anthropic's error event.
func TestMessagesStreamError(t *testing.T) {
	rec := httptest.NewRecorder()
	w := (&messagesTurn{model: "m", stream: true}).Writer(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	_, _ = w.Write([]byte("data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\n"))
	(&openai.Error{Status: 502, Type: "server_error", Code: "upstream_stream_error", Message: "the model's stream broke off"}).WriteEvent(w)
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	out := rec.Body.String()
	if !strings.HasSuffix(out, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"the model's stream broke off\"}}\n\n") {
		t.Errorf("got\n%s", out)
	}
	res := &http.Response{Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(out))}
	stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	for stream.Next() {
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), "broke off") {
		t.Errorf("the official client saw %v, want the error", err)
	}
}

// A handler that copies the answer with io.Copy (which prefers the
// writer's ReadFrom) still has it translated.
func TestMessagesWriterReadFrom(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`
	r := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	rec := httptest.NewRecorder()
	w, _, err := openai.Enter(caddyhttp.NewResponseRecorder(rec, nil, nil), r)
	if err != nil {
		t.Fatal(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	if _, err := io.Copy(w, struct{ io.Reader }{strings.NewReader(chatWhole)}); err != nil {
		t.Fatal(err)
	}
	var m anthropic.Message
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Type != "message" || len(m.Content) != 4 {
		t.Errorf("got %s (%v), want a Message", rec.Body, err)
	}
}

func TestValidString(t *testing.T) {
	for s, want := range map[string]bool{
		`"abc"`: true, `"a\"b\\c\/\b\f\n\r\t"`: true, `"\u00e9\uD834\uDD1E"`: true, `""`: true,
		"\"a\x01\"": false, `"\x"`: false, `"\u00e"`: false, `"\u00eg"`: false, `abc`: false, `"`: false,
	} {
		if got := validString([]byte(s)); got != want {
			t.Errorf("%s: got %v, want %v", s, got, want)
		}
	}
}

// Only the first choice is read, and a malformed string is not copied
// into the events.
func TestMessagesStreamSkips(t *testing.T) {
	rec := httptest.NewRecorder()
	w := (&messagesTurn{model: "m", stream: true}).Writer(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, e := range []string{
		`{"id":"c","choices":[{"index":1,"delta":{"content":"second choice"}},{"index":0,"delta":{"content":"first"}}]}`,
		"{\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad\x01\"}}]}",
		`{"id":"c","choices":[{"delta":{"content":" ok"},"index":0,"finish_reason":"stop"}]}`,
		`[DONE]`,
	} {
		_, _ = w.Write([]byte("data: " + e + "\n\n"))
	}
	if m := accumulate(t, rec.Body.Bytes()); len(m.Content) != 1 || m.Content[0].Text != "first ok" {
		t.Errorf("got %s", rec.Body)
	}
}

// The stop sequence the engine names in its finish chunk is the one the
// stream's message_delta gives, though the events after it reach the
// writer in the same reused buffer, as the router forwards them.
func TestMessagesStreamStopSequence(t *testing.T) {
	rec := httptest.NewRecorder()
	w := (&messagesTurn{model: "m", stream: true, stops: []string{"END", "STOP"}}).Writer(rec)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	buf := make([]byte, 0, 512)
	for _, e := range []string{
		`{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"a"}}]}`,
		`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"STOP"}]}`,
		`{"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
		`[DONE]`,
	} {
		buf = append(append(append(buf[:0], "data: "...), e...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if body := rec.Body.String(); !strings.Contains(body, `"stop_reason":"stop_sequence","stop_sequence":"STOP"}`) {
		t.Errorf("got %s", body)
	}
}
