package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/llmgw/llmgw/modules/internal/jsonerr"
)

// Error is an API error in OpenAI's shape:
// {"error":{"message":…,"type":…,"param":…,"code":…}}.
type Error struct {
	Status     int
	Message    string
	Type       string
	Code       string
	Param      string
	RetryAfter time.Duration // sets Retry-After when positive
}

func (e *Error) Error() string { return e.Message }

// BadRequest is a 400 invalid_request_error.
func BadRequest(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: code,
		Message: fmt.Sprintf(format, args...)}
}

// ErrorBody is the JSON body of an Error, as Error.JSON writes it.
type ErrorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// JSON returns the error body.
func (e *Error) JSON() []byte {
	var b ErrorBody
	b.Error.Message, b.Error.Type = e.Message, e.Type
	if e.Code != "" {
		b.Error.Code = &e.Code
	}
	if e.Param != "" {
		b.Error.Param = &e.Param
	}
	out, _ := json.Marshal(b)
	return out
}

// Write writes the error as a response.
func (e *Error) Write(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	noteError(w, e.Code)
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.JSON())
}

// WriteEvent writes the error as an SSE event, for errors after the first
// streamed byte.
func (e *Error) WriteEvent(w http.ResponseWriter) {
	noteError(w, e.Code)
	buf := make([]byte, 0, 256)
	buf = append(buf, "data: "...)
	buf = append(buf, e.JSON()...)
	buf = append(buf, "\n\n"...)
	_, _ = w.Write(buf)
	_ = http.NewResponseController(w).Flush()
}

// DecodeProblem says why JSON did not decode into the package's shapes in
// the API's terms: which member has which wrong type, or where the syntax
// breaks; never the Go types it was decoded into.
func DecodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s must be %s, not %s", te.Field, jsonerr.Kind(te.Type), te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("it must be an object, not %s", te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("it is not valid JSON (at byte %d)", se.Offset)
	}
	return "it is not valid JSON"
}
