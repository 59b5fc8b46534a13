package anthropic

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
)

func TestConformance(t *testing.T) {
	// A stand-in for Anthropic's API: it lists models for key k.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" || r.Header.Get("x-api-key") != "k" || r.Header.Get("anthropic-version") == "" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	t.Cleanup(provider.Close)
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "m", Options: map[string]string{"api_key": "k", "base_url": provider.URL + "/v1"}}}
	t.Run("direct", func(t *testing.T) { enginetest.Run(t, New(), opts) })
	t.Run("grpc", func(t *testing.T) { enginetest.Run(t, enginetest.OverGRPC(t, New()), opts) })
}

func TestInfo(t *testing.T) {
	info, err := New().Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, o := range info.Options {
		names = append(names, o.Name)
	}
	if info.Type != "anthropic" || !cmp.Equal(info.Capabilities, []string{engine.CapMessages}) || !cmp.Equal(info.Formats, []string{"remote"}) ||
		!cmp.Equal(names, []string{"base_url", "api_key", "version", "beta", "model", "probe_interval"}) {
		t.Errorf("got %+v", info)
	}
}

func TestStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		options map[string]string
		args    []string
		want    engine.Replica
		err     string // error substring
	}{
		{name: "defaults", options: map[string]string{"api_key": "sk-ant"},
			want: engine.Replica{ID: "r", BaseURL: "https://api.anthropic.com/v1", Headers: map[string]string{"x-api-key": "sk-ant", "anthropic-version": "2023-06-01"}}},
		{name: "all set", options: map[string]string{"base_url": "http://127.0.0.1:9/v1/", "api_key": "k", "version": "2024-01-01", "beta": "prompt-caching-2024-07-31", "model": "claude-x"},
			want: engine.Replica{ID: "r", BaseURL: "http://127.0.0.1:9/v1", UpstreamModel: "claude-x",
				Headers: map[string]string{"x-api-key": "k", "anthropic-version": "2024-01-01", "anthropic-beta": "prompt-caching-2024-07-31"}}},
		{name: "no key", options: map[string]string{},
			want: engine.Replica{ID: "r", BaseURL: "https://api.anthropic.com/v1", Headers: map[string]string{"anthropic-version": "2023-06-01"}}},
		{name: "not http", options: map[string]string{"base_url": "ftp://x"}, err: "not an http(s) URL"},
		{name: "endpoint given", options: map[string]string{"base_url": "https://api.anthropic.com/v1/messages"}, err: "without /messages"},
		{name: "unknown option", options: map[string]string{"azure_deployment": "d"}, err: `no option "azure_deployment"`},
		{name: "args", options: map[string]string{}, args: []string{"--x"}, err: "args mean nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := New().Start(t.Context(), engine.ReplicaSpec{Model: "m", ReplicaID: "r", Options: tc.options, Args: tc.args})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("got %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, rep); diff != "" {
				t.Errorf("replica (-want +got):\n%s", diff)
			}
		})
	}
}
