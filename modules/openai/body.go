package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// load reads r's body once, into a buffer of its announced size, and
// parses it.
func load(r *http.Request, endpoint string) (*Request, error) {
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return nil, err
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, BadRequest("missing_body", "the request has no body; send a JSON object")
	}
	if r.ContentLength > MaxBodyBytes {
		return nil, tooLarge(MaxBodyBytes)
	}
	body, err := readBody(r.Body, r.ContentLength)
	if err != nil {
		return nil, bodyError(err)
	}
	if len(body) >= bigBody {
		bigBodies.hold(r.Context())
	}
	if api := APIOf(endpoint); api != APIChat {
		a, ok := apis[api]
		if !ok {
			return nil, &Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
				Message: fmt.Sprintf("this gateway was built without the %s API; build it with github.com/llmgw/llmgw/modules/openai/%sapi imported", api, api)}
		}
		return a.Parse(r, endpoint, body)
	}
	return Parse(endpoint, body)
}

// checkContentType accepts a body sent as JSON (application/json or
// application/<something>+json, with any parameters) or without a
// Content-Type; another one is answered 415, so that a form or a file
// sent by mistake is named as such rather than as a JSON syntax error.
func checkContentType(ct string) error {
	if ct == "" {
		return nil
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	typ, sub, ok := strings.Cut(mt, "/")
	if ok && strings.EqualFold(typ, "application") && (strings.EqualFold(sub, "json") ||
		len(sub) > 5 && strings.EqualFold(sub[len(sub)-5:], "+json")) {
		return nil
	}
	msg := fmt.Sprintf("the request's Content-Type is %q; send the body as JSON with Content-Type: application/json", ct)
	if strings.EqualFold(mt, "application/x-www-form-urlencoded") {
		msg += " (curl -d sends a form unless told otherwise: add -H 'Content-Type: application/json')"
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type", Message: msg}
}

// readBody reads a body of length n (-1: unknown) up to MaxBodyBytes. A
// known length is read into one buffer of that size, so that a large body
// costs its size once rather than the copies of a growing buffer.
func readBody(rc io.Reader, n int64) ([]byte, error) {
	if n < 0 {
		body, err := io.ReadAll(io.LimitReader(rc, MaxBodyBytes+1))
		if err == nil && int64(len(body)) > MaxBodyBytes {
			err = errTooLarge
		}
		return body, err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rc, body); err != nil {
		return nil, err
	}
	return body, nil
}

var errTooLarge = errors.New("request body too large")

func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "body_too_large",
		Message: fmt.Sprintf("the request body is larger than this gateway accepts (%d bytes); send less, or split it", limit)}
}

// bodyError maps a failed body read to its answer: 413 when a limit was
// hit (ours or Caddy's request_body max_size), 408 when the client sent
// too slowly for the server's read timeouts, else 499.
func bodyError(err error) *Error {
	var mbe *http.MaxBytesError
	var ne net.Error
	switch {
	case errors.Is(err, errTooLarge):
		return tooLarge(MaxBodyBytes)
	case errors.As(err, &mbe):
		return tooLarge(mbe.Limit)
	case errors.As(err, &ne) && ne.Timeout():
		return &Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: "the request body arrived too slowly (the server's read_body timeouts); send it faster or in one go"}
	}
	return &Error{Status: 499, Type: "invalid_request_error", Code: "client_closed",
		Message: fmt.Sprintf("reading the request body: %v", err)}
}

// bigBody is the size from which a body counts as big: after a burst of
// big bodies the memory they took is given back to the OS.
const bigBody = 1 << 20

// bigBodies gives the memory of a burst of big bodies back to the OS once
// the burst is over. The Go runtime keeps freed memory until a collection
// runs and its scavenger returns it, which on an idle gateway is minutes
// later (the forced collection every 2 minutes): a burst of 10 MB bodies
// kept RSS at 400 MB for 2 minutes, and at 170 MB after that. Once no
// request with a big body has been in flight for releaseAfter, one
// collection returns that memory at once.
var bigBodies releaser

const releaseAfter = 5 * time.Second

type releaser struct {
	mu       sync.Mutex
	inFlight int
	last     time.Time // when the last request with a big body ended
	timer    *time.Timer
}

// hold counts a request with a big body until ctx, the request's, ends.
func (rl *releaser) hold(ctx context.Context) {
	rl.mu.Lock()
	rl.inFlight++
	rl.mu.Unlock()
	context.AfterFunc(ctx, rl.done)
}

func (rl *releaser) done() {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	rl.inFlight--
	rl.last = time.Now()
	if rl.timer == nil {
		rl.timer = time.AfterFunc(releaseAfter, rl.release)
	}
}

func (rl *releaser) release() {
	rl.mu.Lock()
	switch wait := releaseAfter - time.Since(rl.last); {
	case rl.inFlight > 0:
		rl.timer = nil // the last to end arms it again
		rl.mu.Unlock()
		return
	case wait > 0:
		rl.timer.Reset(wait) // the burst went on
		rl.mu.Unlock()
		return
	}
	rl.timer = nil
	rl.mu.Unlock()
	debug.FreeOSMemory()
}
