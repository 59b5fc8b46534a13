package openai

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
)

func TestConformance(t *testing.T) {
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "m", Options: map[string]string{"base_url": "https://api.example.com/v1"}}}
	t.Run("direct", func(t *testing.T) { enginetest.Run(t, New(), opts) })
	t.Run("grpc", func(t *testing.T) { enginetest.Run(t, enginetest.OverGRPC(t, New()), opts) })
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options map[string]string
		want    string // error substring, or "" for success
		args    []string
	}{
		{"args", map[string]string{"base_url": "https://x/v1"}, "args mean nothing to it", []string{"--host", "0.0.0.0"}},
		{"no base_url", map[string]string{}, "needs option base_url", nil},
		{"not http", map[string]string{"base_url": "ftp://x"}, "not an http(s) URL", nil},
		{"unknown option", map[string]string{"base_url": "https://x/v1", "colour": "red"}, `no option "colour"`, nil},
		{"ok", map[string]string{"base_url": "https://x/v1/", "api_key": "k", "model": "up"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := New().Start(t.Context(), engine.ReplicaSpec{Model: "m", ReplicaID: "r", Options: tc.options, Args: tc.args})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("got %v, want an error containing %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.BaseURL != "https://x/v1" || rep.Headers["Authorization"] != "Bearer k" || rep.UpstreamModel != "up" {
				t.Errorf("got %+v", rep)
			}
		})
	}
}
