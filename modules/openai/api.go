package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// The APIs a client may speak. Chat completions is the gateway's own
// form: a request in another API is translated to it when it enters, every
// llm_* handler sees a chat-completions request and answer, and the answer
// is translated back on its way out (see Enter). A replica whose engine
// speaks the client's API itself gets the client's bytes unchanged when
// no handler needs to read the answer (see Request.Native).
const (
	APIChat      = ""          // chat/completions, completions, embeddings
	APIResponses = "responses" // OpenAI Responses: POST /v1/responses
	APIMessages  = "messages"  // Anthropic Messages: POST /v1/messages
)

// Endpoints of the translated APIs (paths after /v1/).
const (
	Responses   = "responses"
	Messages    = "messages"
	CountTokens = "messages/count_tokens"
)

// EndpointOf returns the API endpoint of a request that generates (a POST
// to one of the endpoints under /v1/ that the gateway serves), and false
// for any other request.
func EndpointOf(r *http.Request) (string, bool) {
	if r.Method != http.MethodPost {
		return "", false
	}
	i := strings.Index(r.URL.Path, "/v1/")
	if i < 0 {
		return "", false
	}
	switch ep := r.URL.Path[i+4:]; ep {
	case ChatCompletions, Completions, Embeddings, Responses, Messages, CountTokens:
		return ep, true
	}
	return "", false
}

// APIOf names the API an endpoint belongs to.
func APIOf(endpoint string) string {
	switch endpoint {
	case Responses:
		return APIResponses
	case Messages, CountTokens:
		return APIMessages
	}
	return APIChat
}

// Translation is what a request translated from another API keeps to
// answer in that API.
type Translation interface {
	// Writer wraps w: a chat-completions answer written to it (a status,
	// then a whole JSON body or SSE events in any chunking) reaches w in
	// the client's API. An error (status >= 400) is written in the API's
	// error shape; an SSE error event becomes the API's error event.
	Writer(w http.ResponseWriter) http.ResponseWriter
}

// Enter parses a generating request once, for the first llm_* handler that
// sees it, and returns the writer the handler is to pass on: for a request
// in another API than chat completions, w wrapped so that the
// chat-completions answer the handlers after it write reaches the client
// in its API; else w itself. Later calls return w and the same request (or
// error). A request that does not generate returns (w, nil, ErrNotGenerating).
func Enter(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *Request, error) {
	if v, ok := caddyhttp.GetVar(r.Context(), varKey).(loaded); ok {
		return w, v.req, v.err
	}
	endpoint, ok := EndpointOf(r)
	if !ok {
		return w, nil, ErrNotGenerating
	}
	req, err := load(r, endpoint)
	if api := APIOf(endpoint); api != APIChat {
		w = &apiWriter{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}, api: api, req: req}
	}
	caddyhttp.SetVar(r.Context(), varKey, loaded{req, err})
	return w, req, err
}

// ErrNotGenerating is Enter's answer for a request that is not a POST to a
// generating endpoint.
var ErrNotGenerating = errors.New("not a generating request")

// apiWriter sends an answer to a client of another API: through the
// translation, or unchanged when the router passed the engine's own
// answer in the client's API (Request.Native).
type apiWriter struct {
	caddyhttp.ResponseWriterWrapper
	api     string
	req     *Request // nil when parsing failed
	tw      http.ResponseWriter
	decided bool
}

func (w *apiWriter) target() http.ResponseWriter {
	if !w.decided {
		w.decided = true
		switch {
		case w.req != nil && w.req.Native:
			w.tw = w.ResponseWriter
		case w.req != nil && w.req.Translation != nil:
			w.tw = w.req.Translation.Writer(w.ResponseWriter)
		default:
			w.tw = errorWriter(w.api, w.ResponseWriter)
		}
	}
	return w.tw
}

// Header is the client's: the translations write theirs there too, and
// handlers set headers before the router has chosen how to answer.
func (w *apiWriter) Header() http.Header { return w.ResponseWriter.Header() }

func (w *apiWriter) WriteHeader(status int) { w.target().WriteHeader(status) }

func (w *apiWriter) Write(b []byte) (int, error) { return w.target().Write(b) }

// ReadFrom goes through the target's Write (io.Copy to this writer would
// otherwise reach the client untranslated, through the embedded wrapper).
func (w *apiWriter) ReadFrom(r io.Reader) (int64, error) { return io.Copy(writerOnly{w.target()}, r) }

// Unwrap lets http.ResponseController reach the translation's writer
// (which flushes its own buffered output before the client's).
func (w *apiWriter) Unwrap() http.ResponseWriter { return w.target() }

// errorWriter answers a request of api that could not be translated (it
// failed to parse): only errors are written to it.
func errorWriter(api string, w http.ResponseWriter) http.ResponseWriter {
	if a, ok := apis[api]; ok {
		return a.ErrorWriter(w)
	}
	return w
}

// API is the translation of a client's API other than chat completions
// (APIResponses, APIMessages) to and from chat completions. Each lives in
// a package of its own (modules/openai/responsesapi,
// modules/openai/messagesapi) that registers it in init; a handler that
// calls Enter imports them, so that Enter can dispatch on the API without
// this package importing its translations.
type API interface {
	// Parse reads a request to one of the API's endpoints and returns it
	// translated to chat completions: API, Original and Translation set.
	Parse(r *http.Request, endpoint string, body []byte) (*Request, error)
	// ErrorWriter wraps w for a request of the API that failed to parse:
	// an error written to it reaches the client in the API's error shape.
	ErrorWriter(w http.ResponseWriter) http.ResponseWriter
}

// apis are the registered translations by API name. Written in init only.
var apis = map[string]API{}

// RegisterAPI registers the translation of the API name. Call it from
// init; registering a name twice, or chat completions, panics.
func RegisterAPI(name string, a API) {
	if _, dup := apis[name]; dup || name == APIChat || a == nil {
		panic("openai: bad or duplicate registration of API " + name)
	}
	apis[name] = a
}

// WriteFor writes the error in the shape of the API r's path belongs to:
// for handlers that answer before the request is parsed (a bad key).
func (e *Error) WriteFor(w http.ResponseWriter, r *http.Request) {
	ep, _ := EndpointOf(r)
	errorWriterForPath(r, ep, w, e)
}

func errorWriterForPath(r *http.Request, ep string, w http.ResponseWriter, e *Error) {
	if ep == "" && strings.Contains(r.URL.Path, "/v1/messages") {
		ep = Messages
	}
	e.Write(errorWriter(APIOf(ep), w))
}

// Scope is the key a request's stored responses belong to: llm_quota's
// key id, or "" without llm_quota.
func Scope(r *http.Request) string { return Log(r).Key }

// APIName names the request's API for metrics and logs: the endpoint for
// chat completions' family, else the API.
func (r *Request) APIName() string {
	if r.API != APIChat {
		return r.API
	}
	return r.Endpoint
}

// NativeBody is the client's own body for an engine that speaks its API,
// with the model renamed when the engine names it differently.
func (r *Request) NativeBody(model string) ([]byte, error) {
	if model == "" {
		return r.Original, nil
	}
	start, end, err := memberSpan(r.Original, "model")
	if err != nil || start < 0 {
		return nil, errors.New("the request has no model member")
	}
	v, _ := json.Marshal(model)
	out := make([]byte, 0, len(r.Original)-(end-start)+len(v))
	out = append(out, r.Original[:start]...)
	out = append(out, v...)
	return append(out, r.Original[end:]...), nil
}

// PassesThrough reports whether the request may reach an engine that
// speaks its API in the client's own bytes: a translation may refuse (a
// Responses request that continues a response this gateway stored).
func PassesThrough(r *Request) bool {
	if p, ok := r.Translation.(interface{ PassThrough() bool }); ok {
		return p.PassThrough()
	}
	return r.Translation != nil
}

// NativeUsage reads usage in the Messages and Responses shapes
// (input_tokens, output_tokens, cache_read_input_tokens,
// cache_creation_input_tokens) from a body or one stream event, adding it
// to so far: a Messages stream reports input tokens in message_start and
// the output so far in each message_delta.
func NativeUsage(b []byte, soFar Usage) (Usage, bool) {
	i := bytes.LastIndex(b, usageKey)
	if i < 0 {
		return soFar, false
	}
	rest := bytes.TrimLeft(b[i+len(usageKey):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return soFar, false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	end := objectEnd(rest)
	if len(rest) == 0 || rest[0] != '{' || end < 0 {
		return soFar, false
	}
	var n struct {
		In     *int64 `json:"input_tokens"`
		Out    *int64 `json:"output_tokens"`
		Read   int64  `json:"cache_read_input_tokens"`
		Create int64  `json:"cache_creation_input_tokens"`
	}
	if err := json.Unmarshal(rest[:end], &n); err != nil {
		return soFar, false
	}
	u := soFar
	if n.In != nil && (*n.In > 0 || n.Read > 0 || n.Create > 0 || u.PromptTokens == 0) {
		u.PromptTokens = *n.In + n.Read + n.Create
	}
	if n.Out != nil {
		u.CompletionTokens = *n.Out
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u, n.In != nil || n.Out != nil
}

// writerOnly hides all but Write, so that io.Copy calls it.
type writerOnly struct{ io.Writer }
