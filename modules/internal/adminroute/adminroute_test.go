package adminroute

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
)

// audited is an audit entry as the test's audit log keeps it.
type audited struct {
	action string
	fields map[string]string
}

var testOps = []Op{
	{Method: "GET", Path: "/llm/t/things"},
	{Method: "POST", Path: "/llm/t/things", Audit: "thing created"},
	{Method: "DELETE", Path: "/llm/t/things/{id}", Audit: "thing deleted"},
	{Method: "POST", Path: "/llm/t/things/{id}/search"},
}

// TestServe: each declared route reaches the handler with its path's
// parameters; undeclared ones answer 404 or 405 naming the routes; a
// successful change is audited with its parameters and the handler's
// fields, a failed one, a read and a search are not.
func TestServe(t *testing.T) {
	h := caddy.AdminHandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		if r.URL.Query().Get("fail") != "" {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: errors.New("bad thing")}
		}
		if r.URL.Query().Get("status") != "" {
			w.WriteHeader(http.StatusConflict)
			return nil
		}
		AddAuditFields(r, zap.String("name", "n1"))
		fmt.Fprintf(w, "%s %s", r.Pattern, r.PathValue("id"))
		return nil
	})
	tests := []struct {
		method, path string
		status       int
		body         string
		audit        string
	}{
		{"GET", "/llm/t/things", 200, "GET /llm/t/things ", ""},
		{"POST", "/llm/t/things", 200, "POST /llm/t/things ", "thing created map[name:n1]"},
		{"DELETE", "/llm/t/things/x1", 200, "DELETE /llm/t/things/{id} x1", "thing deleted map[id:x1 name:n1]"},
		{"POST", "/llm/t/things/x1/search", 200, "POST /llm/t/things/{id}/search x1", ""},
		{"DELETE", "/llm/t/things/x1?fail=1", 400, "bad thing", ""},
		{"DELETE", "/llm/t/things/x1?status=1", 409, "", ""},
		{"PUT", "/llm/t/things/x1", 405, "PUT /llm/t/things/x1: use DELETE", ""},
		{"GET", "/llm/t/nope", 404, "no admin route GET /llm/t/nope; the routes here are GET /llm/t/things, POST /llm/t/things, DELETE /llm/t/things/{id}, POST /llm/t/things/{id}/search", ""},
	}
	for _, tt := range tests {
		var got []audited
		audit := func(r *http.Request, action string, fields ...zap.Field) {
			m := map[string]string{}
			for _, f := range fields {
				m[f.Key] = f.String
			}
			got = append(got, audited{action, m})
		}
		rec := httptest.NewRecorder()
		err := serve(rec, httptest.NewRequest(tt.method, tt.path, nil), testOps, h, audit)
		status, body := rec.Code, rec.Body.String()
		var ae caddy.APIError
		if errors.As(err, &ae) {
			status, body = ae.HTTPStatus, ae.Err.Error()
		}
		if status != tt.status || !strings.HasPrefix(body, tt.body) {
			t.Errorf("%s %s: got %d %q, want %d %q", tt.method, tt.path, status, body, tt.status, tt.body)
		}
		var a string
		if len(got) == 1 {
			a = fmt.Sprint(got[0].action, " ", got[0].fields)
		} else if len(got) > 1 {
			a = fmt.Sprint(got)
		}
		if a != tt.audit {
			t.Errorf("%s %s: audited %q, want %q", tt.method, tt.path, a, tt.audit)
		}
	}
}
