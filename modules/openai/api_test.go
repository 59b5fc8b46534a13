package openai

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// A build without an API's translation answers its requests with a 404
// that names the package to build with, never an untranslated request.
func TestEnterUnregisteredAPI(t *testing.T) {
	if a, ok := apis[APIMessages]; ok {
		delete(apis, APIMessages)
		defer func() { apis[APIMessages] = a }()
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`))
	r = r.WithContext(context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{}))
	_, req, err := Enter(httptest.NewRecorder(), r)
	e, ok := err.(*Error)
	if req != nil || !ok || e.Status != http.StatusNotFound || !strings.Contains(e.Message, "modules/openai/messagesapi") {
		t.Errorf("got %v, %v; want a 404 naming modules/openai/messagesapi", req, err)
	}
}
