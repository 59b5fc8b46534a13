package responsesapi

import (
	"net/http"
	"strconv"

	"github.com/llmgw/llmgw/modules/openai"
)

// Writer returns the writer that turns the chat-completions answer written
// to it into the Responses answer on w.
func (t *respTurn) Writer(w http.ResponseWriter) http.ResponseWriter {
	return &respWriter{w: w, t: t}
}

// respWriter translates one answer. A status >= 300 and its body pass
// unchanged (chat's errors have the Responses API's shape). A JSON body
// is collected until its object closes, then written as one response
// object with its own Content-Length. An SSE body is translated event by
// event as it arrives, in whatever pieces it is written.
type respWriter struct {
	w      http.ResponseWriter
	t      *respTurn
	mode   uint8
	status int
	whole  []byte            // respWhole: the body so far, when it came in pieces
	length int               // respWhole: the body's Content-Length, -1 when unknown
	end    openai.ObjectScan // respWhole: where the body's object ends, when its length is unknown
	s      *respStream
	rc     *http.ResponseController // of w, for flushes
}

const (
	respUndecided = iota
	respPass
	respWhole
	respStreaming
	respDone // respWhole, written
)

func (w *respWriter) Header() http.Header { return w.w.Header() }

func (w *respWriter) WriteHeader(status int) {
	if w.mode != respUndecided {
		return
	}
	if status < 200 {
		w.w.WriteHeader(status) // informational: the answer follows
		return
	}
	w.status = status
	h := w.w.Header()
	switch {
	case status >= 300:
		w.mode = respPass
		w.w.WriteHeader(status)
	case openai.IsSSE(h):
		w.mode = respStreaming
		h.Del("Content-Length")
		w.w.WriteHeader(status)
		w.s = newRespStream(w.t)
	default:
		w.mode = respWhole
		w.length = -1
		if n, err := strconv.Atoi(h.Get("Content-Length")); err == nil && n >= 0 {
			w.length = n
		}
		h.Del("Content-Length")
	}
}

func (w *respWriter) Write(b []byte) (int, error) {
	if w.mode == respUndecided {
		w.WriteHeader(http.StatusOK)
	}
	switch w.mode {
	case respPass:
		return w.w.Write(b)
	case respStreaming:
		w.s.write(b)
		return len(b), w.drain()
	case respWhole:
		return len(b), w.collect(b)
	}
	return len(b), nil // after a whole answer: trailing bytes
}

// collect gathers a whole answer until it is complete (its
// Content-Length, else its object's closing brace), then writes its
// translation. An answer written at once is read where it lies.
func (w *respWriter) collect(b []byte) error {
	body, start := b, 0
	if len(w.whole) > 0 {
		start = len(w.whole)
		w.whole = append(w.whole, b...)
		body = w.whole
	}
	end := w.complete(body, start)
	switch {
	case end == openai.NotObject:
		w.mode = respPass // not ours to translate: as it came
		if w.length >= 0 {
			w.w.Header().Set("Content-Length", strconv.Itoa(w.length))
		}
		w.w.WriteHeader(w.status)
		_, err := w.w.Write(body)
		return err
	case end < 0:
		if start == 0 {
			w.whole = append(w.whole, b...)
		}
		return nil
	}
	w.mode = respDone
	out, err := w.t.wholeAnswer(body[:end])
	if err != nil {
		(&openai.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "untranslatable_answer",
			Message: "the model's answer could not be translated to the Responses API: " + err.Error()}).Write(w.w)
		return nil
	}
	h := w.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.w.WriteHeader(w.status)
	_, err = w.w.Write(out)
	return err
}

// complete returns the end of a whole answer in body (of which
// body[start:] is new), -1 while it is not complete, or NotObject.
func (w *respWriter) complete(body []byte, start int) int {
	if w.length < 0 {
		return w.end.Feed(body, start)
	}
	if i := openai.SkipSpace(body, 0); i < len(body) && body[i] != '{' {
		return openai.NotObject
	}
	if len(body) < w.length {
		return -1
	}
	return w.length
}

func (w *respWriter) drain() error {
	if len(w.s.out) == 0 {
		return nil
	}
	_, err := w.w.Write(w.s.out)
	w.s.out = w.s.out[:0]
	return err
}

// FlushError sends what has been translated; a whole answer is sent
// only once it is complete.
func (w *respWriter) FlushError() error {
	switch w.mode {
	case respStreaming:
		if err := w.drain(); err != nil {
			return err
		}
	case respWhole, respUndecided:
		return nil
	}
	if w.rc == nil {
		w.rc = http.NewResponseController(w.w)
	}
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the client's writer.
func (w *respWriter) Unwrap() http.ResponseWriter { return w.w }
