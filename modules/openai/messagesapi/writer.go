package messagesapi

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/openai"
)

// messagesTurn is the Translation of a Messages request: it writes the
// chat completions answer back as a Messages answer.
type messagesTurn struct {
	model     string   // as the client named it
	stream    bool     // the client asked for a stream
	countOnly bool     // count_tokens: answer {"input_tokens":N}
	stops     []string // stop_sequences, to name the one that matched
}

func (t *messagesTurn) Writer(w http.ResponseWriter) http.ResponseWriter {
	return &messagesWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, turn: t}
}

// newMessagesErrorWriter answers a Messages request that failed before it
// was translated: an OpenAI-shaped error written to it reaches the client
// in Anthropic's error shape; anything else passes unchanged.
func newMessagesErrorWriter(w http.ResponseWriter) http.ResponseWriter {
	return &messagesWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
}

// How a messagesWriter handles what is written to it, decided by the
// status and Content-Type at WriteHeader.
const (
	modeUnset  = iota
	modePass   // not ours to translate: unchanged
	modeWhole  // a whole chat completion, buffered until its JSON closes
	modeError  // an error body, buffered until its JSON closes
	modeStream // chat SSE events, translated as they arrive
	modeDone   // the answer is written; the rest is dropped
)

// messagesWriter turns a chat completions answer, in any chunking, into a
// Messages answer: a whole JSON body is buffered until its object closes
// (or its Content-Length is reached), then translated; a stream is
// translated event by event as its bytes arrive, nothing held back but a
// partial line.
type messagesWriter struct {
	caddyhttp.ResponseWriterWrapper
	turn    *messagesTurn // nil: errors only
	mode    int
	status  int
	wantLen int64 // the Content-Length announced, or -1
	buf     []byte
	end     openai.ObjectScan
	stream  *chatToMessages
	out     []byte // the translated events of one write
}

func (w *messagesWriter) WriteHeader(status int) {
	if w.mode != modeUnset || status < 200 {
		if w.mode == modeUnset || w.mode == modePass {
			w.ResponseWriter.WriteHeader(status)
		}
		return
	}
	h := w.ResponseWriter.Header()
	w.status, w.wantLen = status, -1
	switch {
	case status >= 400:
		w.mode = modeError
	case w.turn == nil:
		w.mode = modePass
		w.ResponseWriter.WriteHeader(status)
		return
	case openai.IsSSE(h) && !w.turn.countOnly:
		w.mode = modeStream
		w.stream = newChatToMessages(w.turn)
		h.Del("Content-Length")
		w.ResponseWriter.WriteHeader(status)
		return
	default:
		w.mode = modeWhole
	}
	if n, err := strconv.ParseInt(h.Get("Content-Length"), 10, 64); err == nil {
		w.wantLen = n
	}
	h.Del("Content-Length")
}

func (w *messagesWriter) Write(b []byte) (int, error) {
	if w.mode == modeUnset {
		w.WriteHeader(http.StatusOK)
	}
	switch w.mode {
	case modePass:
		return w.ResponseWriter.Write(b)
	case modeStream:
		w.out = w.stream.feed(w.out[:0], b)
		if w.stream.done {
			w.mode = modeDone
		}
		if len(w.out) == 0 {
			return len(b), nil
		}
		if _, err := w.ResponseWriter.Write(w.out); err != nil {
			return 0, err
		}
		return len(b), nil
	case modeWhole, modeError:
		if len(w.buf) == 0 && w.mode == modeError && len(bytes.TrimSpace(b)) > 0 && bytes.TrimSpace(b)[0] != '{' {
			// Not a JSON error: nothing to translate, pass it on.
			w.mode = modePass
			w.ResponseWriter.WriteHeader(w.status)
			return w.ResponseWriter.Write(b)
		}
		w.buf = append(w.buf, b...)
		if w.end.Feed(b, 0) >= 0 || (w.wantLen >= 0 && int64(len(w.buf)) >= w.wantLen) {
			return len(b), w.finish()
		}
	}
	return len(b), nil
}

// finish writes the translation of a buffered body.
func (w *messagesWriter) finish() error {
	body, status := w.buf, w.status
	w.buf, w.mode = nil, modeDone
	h := w.ResponseWriter.Header()
	var out []byte
	switch {
	case status >= 400:
		out = messagesErrorFromOpenAI(status, body)
	case w.turn.countOnly:
		u, _ := openai.FindUsage(body)
		out = append(append([]byte(`{"input_tokens":`), strconv.FormatInt(u.PromptTokens, 10)...), '}')
	default:
		msg, err := messageFromChat(w.turn, body)
		if err != nil {
			status, out = http.StatusBadGateway, anthropicError("api_error", err.Error())
			break
		}
		if w.turn.stream {
			h.Set("Content-Type", "text/event-stream")
			w.ResponseWriter.WriteHeader(status)
			_, err := w.ResponseWriter.Write(msg.events(nil))
			return err
		}
		out = msg.json(nil)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.ResponseWriter.WriteHeader(status)
	_, err := w.ResponseWriter.Write(out)
	return err
}

// ReadFrom goes through Write: the embedded wrapper's would copy to the
// client's writer untranslated.
func (w *messagesWriter) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(writerOnly{w}, r)
}

// writerOnly hides all but Write, so that io.Copy calls it.
type writerOnly struct{ io.Writer }

// FlushError flushes what was translated; a buffered whole answer is not
// flushed (its status is not written yet).
func (w *messagesWriter) FlushError() error {
	if w.mode == modeStream || w.mode == modePass || w.mode == modeDone {
		return http.NewResponseController(w.ResponseWriter).Flush()
	}
	return nil
}

func (w *messagesWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the client's writer for what
// this writer does not do itself (deadlines, hijacking).
func (w *messagesWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// anthropicError is Anthropic's error body.
func anthropicError(typ, message string) []byte {
	out := make([]byte, 0, len(message)+64)
	out = append(out, `{"type":"error","error":{"type":"`...)
	out = append(out, typ...)
	out = append(out, `","message":`...)
	out = openai.AppendJSONString(out, []byte(message))
	return append(out, "}}"...)
}

// anthropicErrorType names the error type Anthropic uses for a status.
func anthropicErrorType(status int) string {
	switch status {
	case 400:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	case 413:
		return "request_too_large"
	case 429:
		return "rate_limit_error"
	case 503, 529:
		return "overloaded_error"
	case 504:
		return "timeout_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// openAIErr is the error member of an OpenAI error body or event.
type openAIErr struct {
	Message string          `json:"message"`
	Type    string          `json:"type"`
	Code    json.RawMessage `json:"code"`
}

// messagesErrorFromOpenAI turns an OpenAI error body into Anthropic's.
// Engines' own shapes ({"error":"…"}, {"detail":"…"}, {"message":"…"})
// keep their message too.
func messagesErrorFromOpenAI(status int, body []byte) []byte {
	var e struct {
		Error openAIErr `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		msg = e.Error.Message
	}
	if msg == "" {
		var other map[string]json.RawMessage
		_ = json.Unmarshal(body, &other)
		for _, k := range []string{"error", "detail", "message"} {
			if v := other[k]; openai.KindOf(v) == openai.KindString {
				msg = string(openai.Unquote(v))
				break
			}
		}
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return anthropicError(anthropicErrorType(status), msg)
}

// anthropicTypeOf names the Anthropic error type of an OpenAI error met
// mid-stream, where no status tells.
func anthropicTypeOf(e openAIErr) string {
	code := string(openai.Unquote(e.Code))
	switch {
	case e.Type == "authentication_error" || code == "invalid_api_key":
		return "authentication_error"
	case e.Type == "permission_error" || code == "model_not_allowed":
		return "permission_error"
	case e.Type == "not_found_error" || code == "model_not_found":
		return "not_found_error"
	case e.Type == "rate_limit_error" || code == "rate_limit_exceeded" || e.Type == "tokens" || e.Type == "requests":
		return "rate_limit_error"
	case code == "overloaded" || code == "no_capacity" || e.Type == "overloaded_error":
		return "overloaded_error"
	case e.Type == "invalid_request_error":
		return "invalid_request_error"
	}
	return "api_error"
}

// stopReason maps a chat finish_reason to Anthropic's stop_reason; stop is
// the matched stop sequence, when the engine names it.
func stopReason(finish string, tools bool, stop []byte) string {
	switch {
	case finish == "length":
		return "max_tokens"
	case finish == "tool_calls" || finish == "function_call" || tools:
		return "tool_use"
	case finish == "content_filter":
		return "refusal"
	case stop != nil:
		return "stop_sequence"
	}
	return "end_turn"
}

// matchedStop returns the stop sequence a choice's stop_reason (vLLM
// names the string that stopped it) matched, as a JSON string, or nil.
func matchedStop(t *messagesTurn, raw []byte) []byte {
	if openai.KindOf(raw) != openai.KindString || len(t.stops) == 0 {
		return nil
	}
	if slices.Contains(t.stops, string(openai.Unquote(raw))) {
		return raw
	}
	return nil
}

// messageID is the Messages id of a chat answer's id.
func messageID(chatID []byte) []byte {
	id := openai.Unquote(chatID)
	if len(id) == 0 {
		var b [12]byte
		openai.FillRandom(b[:])
		id = []byte(hex.EncodeToString(b[:]))
	}
	if bytes.HasPrefix(id, []byte("msg_")) {
		return id
	}
	return append([]byte("msg_"), id...)
}

// toolID makes an id for a tool call the engine sent without one.
func toolID() []byte {
	var b [12]byte
	openai.FillRandom(b[:])
	return []byte(`"toolu_` + hex.EncodeToString(b[:]) + `"`)
}
