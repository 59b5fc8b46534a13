package llm

import (
	"net/http"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/fleet"
)

func TestUpstreamURL(t *testing.T) {
	for _, tc := range []struct{ base, path, want string }{
		{"http://127.0.0.1:8000/v1", "chat/completions", "http://127.0.0.1:8000/v1/chat/completions"},
		{"https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "chat/completions",
			"https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"},
		{"https://api.anthropic.com/v1", "messages/count_tokens", "https://api.anthropic.com/v1/messages/count_tokens"},
	} {
		if got := fleet.UpstreamURL(tc.base, tc.path); got != tc.want {
			t.Errorf("UpstreamURL(%q, %q) = %q, want %q", tc.base, tc.path, got, tc.want)
		}
	}
}

// TestReplicaKeys: a header of several values sends one at a time, and a
// refused one moves the replica on to the next, once per refusal.
func TestReplicaKeys(t *testing.T) {
	r := &fleet.Replica{Header: http.Header{"Api-Key": {"a", "b", "c"}, "X-Other": {"v"}}}
	h := http.Header{}
	k := r.SetHeaders(h)
	if h.Get("Api-Key") != "a" || len(h["Api-Key"]) != 1 || h.Get("X-Other") != "v" || r.Keys() != 3 {
		t.Fatalf("first: %v (keys %d)", h, r.Keys())
	}
	r.NextKey(k)
	r.NextKey(k) // a second request refused with the same key moves nothing
	if r.SetHeaders(h); h.Get("Api-Key") != "b" {
		t.Errorf("after a refusal: %q, want b", h.Get("Api-Key"))
	}
	r.NextKey(1)
	r.NextKey(2)
	if r.SetHeaders(h); h.Get("Api-Key") != "a" {
		t.Errorf("after the last key: %q, want the first again", h.Get("Api-Key"))
	}
}
