package openai

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// TestTrackNotesStatusAndFirstByte: the first handler tracks, later ones
// do not; the status and first byte are noted however the answer is
// written (WriteHeader and Write, Write alone, a copy), and an error's
// code through the writers that wrap the tracked one.
func TestTrackNotesStatusAndFirstByte(t *testing.T) {
	for _, tc := range []struct {
		name   string
		write  func(w http.ResponseWriter)
		status int
		code   string
	}{
		{"header and body", func(w http.ResponseWriter) { w.WriteHeader(201); _, _ = w.Write([]byte("x")) }, 201, ""},
		{"body only", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) }, 200, ""},
		{"copied", func(w http.ResponseWriter) { _, _ = io.Copy(w, strings.NewReader("copied")) }, 200, ""},
		{"an error through a wrapper", func(w http.ResponseWriter) {
			(&Error{Status: 429, Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "slow down"}).Write(&caddyhttp.ResponseWriterWrapper{ResponseWriter: w})
		}, 429, "rate_limit_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.WithValue(context.Background(), caddyhttp.VarsCtxKey, map[string]any{})
			r := httptest.NewRequestWithContext(ctx, "POST", "/v1/chat/completions", nil)
			rec := httptest.NewRecorder()
			w, tr := Track(rec, r)
			if tr == nil || tr.API != ChatCompletions || !strings.HasPrefix(rec.Header().Get("X-Request-Id"), "req_") {
				t.Fatalf("the first handler does not track: %v %q", tr, rec.Header().Get("X-Request-Id"))
			}
			if w2, again := Track(w, r); again != nil || w2 != w {
				t.Fatal("a later handler tracks again")
			}
			if Log(r) != &tr.LogFields {
				t.Fatal("Log does not return the tracked fields")
			}
			tc.write(w)
			if tr.Status != tc.status || tr.First.IsZero() || tr.ErrCode != tc.code {
				t.Errorf("noted status %d, first %v, code %q; want %d, a time, %q", tr.Status, tr.First, tr.ErrCode, tc.status, tc.code)
			}
		})
	}
}
