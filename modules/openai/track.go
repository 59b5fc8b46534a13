package openai

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// Tracked is a request the request log follows: its log fields and the
// writer that notes the answer's status and the time of its first byte.
// The first llm handler a request reaches makes it (Track), so one
// allocation serves the access log, the request log and the status.
type Tracked struct {
	caddyhttp.ResponseWriterWrapper
	LogFields
}

// Track makes the request's Tracked when the calling handler is the
// first llm handler to see the request, sets its request id (answered
// in X-Request-Id) and returns the writer the handler must pass on and
// the Tracked it must hand to the request log once the rest of the
// chain has returned. For any later handler it returns w and nil.
func Track(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *Tracked) {
	if caddyhttp.GetVar(r.Context(), logVar) != nil {
		return w, nil
	}
	t := &Tracked{ResponseWriterWrapper: caddyhttp.ResponseWriterWrapper{ResponseWriter: w}}
	t.Start = time.Now()
	t.RequestID = NewRequestID(t.Start)
	if ep, ok := EndpointOf(r); ok {
		t.API = APIName(ep)
	}
	w.Header().Set("X-Request-Id", t.RequestID)
	addLogFields(r, &t.LogFields)
	return t, t
}

// WriteHeader notes the first final status.
func (t *Tracked) WriteHeader(status int) {
	if t.Status == 0 && status >= 200 {
		t.Status = status
	}
	t.ResponseWriter.WriteHeader(status)
}

// Write notes the time of the first byte (and a 200 when no status was
// written).
func (t *Tracked) Write(b []byte) (int, error) {
	if t.First.IsZero() && len(b) > 0 {
		t.First = time.Now()
		if t.Status == 0 {
			t.Status = http.StatusOK
		}
	}
	return t.ResponseWriter.Write(b)
}

// ReadFrom copies through Write, so that a copied answer's status and
// first byte are noted too.
func (t *Tracked) ReadFrom(r io.Reader) (int64, error) { return io.Copy(writerOnly{t}, r) }

// Flush flushes the writer beneath.
func (t *Tracked) Flush() { _ = http.NewResponseController(t.ResponseWriter).Flush() }

// NewRequestID makes a request id: req_ and 28 hex digits, the first 12
// the arrival's Unix milliseconds, so ids sort by time, the rest random.
func NewRequestID(at time.Time) string {
	var raw [14]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(at.UnixMilli()))
	copy(raw[:6], ms[2:])
	binary.BigEndian.PutUint64(raw[6:], rand.Uint64())
	var out [4 + 28]byte
	copy(out[:], "req_")
	hex.Encode(out[4:], raw[:])
	return string(out[:])
}

// APIName names an endpoint's API as Request.APIName does.
func APIName(endpoint string) string {
	if api := APIOf(endpoint); api != APIChat {
		return api
	}
	return endpoint
}

// noteError puts an error's code on the log fields of the writer it is
// written to, found through the writers that wrap it.
func noteError(w http.ResponseWriter, code string) {
	for range 16 {
		if t, ok := w.(*Tracked); ok {
			if t.ErrCode == "" {
				t.ErrCode = code
			}
			return
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return
		}
		w = u.Unwrap()
	}
}
