// Package standin is a stand-in for an outside provider, for tests: an
// http.Handler that speaks Anthropic's Messages API and OpenAI's
// Responses and chat completions APIs (Azure OpenAI's paths and api-key
// header included) the way the providers' documentation shows them, in
// answers and in streams. It is not an engine plugin and not inference:
// its answers are made up, deterministic for a request, and it records
// every exchange (the request as it arrived, the response bytes as it
// sent them) so that a test can compare what passed through the gateway
// with what the provider sent.
//
// Endpoints:
//
//	POST /v1/messages, /v1/messages/count_tokens     x-api-key (or Bearer), anthropic-version
//	POST /v1/responses, /v1/chat/completions         Authorization: Bearer
//	POST /openai/v1/responses, /openai/v1/chat/completions   api-key (Azure's v1 API)
//	POST /openai/deployments/<d>/chat/completions?api-version=<v>   api-key
//
// How it answers: a user message that names a tool (ignoring case), or a
// tool choice that requires one, gets a tool call whose arguments fit the
// tool's schema (strings with a quote, a backslash, a newline, "é" and
// "東京"); a tool's result gets text quoting its first 40 runes; anything
// else gets "Hello from the stand-in. You said: " and the first 40 runes of
// the user's text. Anthropic requests with thinking enabled get a thinking
// block first; a prompt containing FAIL_MIDSTREAM gets an error event
// after the first deltas; a key marked with Exhaust gets 429 with
// retry-after.
package standin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FailMidstream in a prompt makes a streamed answer end with an error
// event after its first deltas.
const FailMidstream = "FAIL_MIDSTREAM"

// Options configure a stand-in.
type Options struct {
	// Keys are the API keys accepted. Empty: any non-empty key.
	Keys []string
	// Delay is waited before each streamed event after the first.
	// Default: none.
	Delay time.Duration
	// Observe, when set, is called with each exchange once its response
	// is complete.
	Observe func(Exchange)
}

// Exchange is one request and the response the stand-in sent, byte for
// byte.
type Exchange struct {
	Method string
	// URL is the request's path and query.
	URL    string
	Header http.Header
	Body   []byte
	// Status is the response's status code.
	Status         int
	ResponseHeader http.Header
	// Response is every byte of the response body as written, events
	// included; a stream's bytes are recorded before they are sent.
	Response []byte
}

// Server is the stand-in. It is safe for concurrent use.
type Server struct {
	opts Options
	seq  atomic.Int64

	mu        sync.Mutex
	log       []*Exchange
	exhausted map[string]time.Duration
	cache     map[string]bool // prompt-cache prefixes written
}

// New returns a stand-in.
func New(opts Options) *Server {
	return &Server{opts: opts, exhausted: map[string]time.Duration{}, cache: map[string]bool{}}
}

// Exhaust marks a key as out of quota: requests with it get 429 with
// retry-after set to the given duration (in whole seconds, at least 1),
// until Restore.
func (s *Server) Exhaust(key string, retryAfter time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exhausted[key] = retryAfter
}

// Restore makes an exhausted key work again.
func (s *Server) Restore(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.exhausted, key)
}

// Exchanges returns copies of the exchanges so far, oldest first. A
// response still being written is returned as far as it went.
func (s *Server) Exchanges() []Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Exchange, len(s.log))
	for i, e := range s.log {
		out[i] = e.copy()
	}
	return out
}

// Last returns a copy of the latest exchange (the zero Exchange if none).
func (s *Server) Last() Exchange {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.log) == 0 {
		return Exchange{}
	}
	return s.log[len(s.log)-1].copy()
}

// Reset forgets the exchanges and the prompt cache.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log, s.cache = nil, map[string]bool{}
}

func (e *Exchange) copy() Exchange {
	c := *e
	c.Header = e.Header.Clone()
	c.ResponseHeader = e.ResponseHeader.Clone()
	c.Body = bytes.Clone(e.Body)
	c.Response = bytes.Clone(e.Response)
	return c
}

// ServeHTTP records the exchange and routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	ex := &Exchange{Method: r.Method, URL: r.URL.RequestURI(), Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.log = append(s.log, ex)
	s.mu.Unlock()
	rw := &recorder{ResponseWriter: w, s: s, ex: ex}
	defer func() {
		if s.opts.Observe != nil {
			s.observe(ex)
		}
	}()
	if err != nil {
		openaiError(rw, http.StatusBadRequest, "invalid_request_error", "reading the body: "+err.Error())
		return
	}
	p := r.URL.Path
	switch {
	case p == "/v1/messages" || p == "/v1/messages/count_tokens":
		s.messages(rw, r, body)
	case p == "/v1/responses" || p == "/openai/v1/responses":
		s.responses(rw, r, body)
	case p == "/v1/chat/completions" || p == "/openai/v1/chat/completions" ||
		strings.HasPrefix(p, "/openai/deployments/") && strings.HasSuffix(p, "/chat/completions"):
		s.chat(rw, r, body)
	default:
		openaiError(rw, http.StatusNotFound, "invalid_request_error", "the stand-in has no endpoint "+p)
	}
}

// observe hands a finished exchange's copy to Options.Observe.
func (s *Server) observe(ex *Exchange) {
	s.mu.Lock()
	c := ex.copy()
	s.mu.Unlock()
	s.opts.Observe(c)
}

func readBody(r *http.Request) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r.Body)
	return b.Bytes(), err
}

// recorder keeps what is written in the exchange before passing it on.
type recorder struct {
	http.ResponseWriter
	s  *Server
	ex *Exchange
}

func (w *recorder) WriteHeader(code int) {
	w.s.mu.Lock()
	w.ex.Status = code
	w.ex.ResponseHeader = w.Header().Clone()
	w.s.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	w.s.mu.Lock()
	if w.ex.Status == 0 {
		w.ex.Status = http.StatusOK
		w.ex.ResponseHeader = w.Header().Clone()
	}
	w.ex.Response = append(w.ex.Response, b...)
	w.s.mu.Unlock()
	return w.ResponseWriter.Write(b)
}

func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// key checks the request's key: status 0 when it may go on, else the
// status to answer, the retry-after of an exhausted key and a message.
func (s *Server) key(k string) (status int, retryAfter time.Duration, msg string) {
	if k == "" {
		return http.StatusUnauthorized, 0, "no API key"
	}
	s.mu.Lock()
	ra, out := s.exhausted[k]
	s.mu.Unlock()
	if out {
		return http.StatusTooManyRequests, ra, "the key's rate limit is exhausted"
	}
	if len(s.opts.Keys) == 0 {
		return 0, 0, ""
	}
	for _, ok := range s.opts.Keys {
		if k == ok {
			return 0, 0, ""
		}
	}
	return http.StatusUnauthorized, 0, "invalid key"
}

func retryAfterHeader(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("retry-after", strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))))
}

// id returns a new identifier with a prefix, unique in this stand-in.
func (s *Server) id(prefix string) string {
	return fmt.Sprintf("%s%024x", prefix, s.seq.Add(1))
}

// encode writes v as compact JSON without HTML escaping.
func encode(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// obj is a JSON object whose keys keep the order given: key, value, …
type obj []any

// MarshalJSON writes the keys in order.
func (o obj) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, encode(o[i])...)
		b = append(b, ':')
		b = append(b, encode(o[i+1])...)
	}
	return append(b, '}'), nil
}

// sse writes server-sent events, flushing each, waiting Delay between
// them.
type sse struct {
	w     http.ResponseWriter
	delay time.Duration
	n     int
}

func (s *Server) startSSE(w http.ResponseWriter, contentType string) *sse {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, delay: s.opts.Delay}
}

// event writes one event; name "" writes a data line only.
func (e *sse) event(name string, data any) {
	if e.n > 0 && e.delay > 0 {
		time.Sleep(e.delay)
	}
	e.n++
	var b []byte
	if name != "" {
		b = append(b, "event: "+name+"\n"...)
	}
	b = append(b, "data: "...)
	if raw, ok := data.(string); ok {
		b = append(b, raw...)
	} else {
		b = append(b, encode(data)...)
	}
	b = append(b, "\n\n"...)
	_, _ = e.w.Write(b)
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

// reply is the text answer to a user's text.
func reply(user string) string {
	return "Hello from the stand-in. You said: " + head(user, 40)
}

// toolReply is the text answer to a tool's result.
func toolReply(result string) string {
	return `The tool returned: "` + head(result, 40) + `".`
}

// head is the first n runes of s.
func head(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// words cuts text into pieces that each start with its space, as tokens
// stream; joined, they are text.
func words(text string) []string {
	var out []string
	start := 0
	for i, r := range text {
		if r == ' ' && i > start {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// countTokens is the stand-in's token count: words.
func countTokens(s string) int { return len(strings.Fields(s)) }

// mentioned returns the names that text mentions, ignoring case, in the
// order given.
func mentioned(text string, names []string) []string {
	text = strings.ToLower(text)
	var out []string
	for _, n := range names {
		if n != "" && strings.Contains(text, strings.ToLower(n)) {
			out = append(out, n)
		}
	}
	return out
}
