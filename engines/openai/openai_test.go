package openai

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
	provider := standIn(t, "k")
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "m", Options: map[string]string{"base_url": provider.URL + "/v1", "api_key": "k"}}}
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

func TestStartAzure(t *testing.T) {
	const res = "https://res.openai.azure.com"
	for _, tc := range []struct {
		name    string
		options map[string]string
		want    engine.Replica
		err     string // error substring
	}{
		{name: "deployment", options: map[string]string{"base_url": res + "/", "azure_deployment": "gpt-4o-prod", "api_version": "2024-10-21", "api_key": "k"},
			want: engine.Replica{ID: "r", BaseURL: res + "/openai/deployments/gpt-4o-prod?api-version=2024-10-21", Headers: map[string]string{"api-key": "k"}}},
		{name: "deployment with /openai", options: map[string]string{"base_url": res + "/openai", "azure_deployment": "d x", "api_version": "2025-04-01-preview", "api_key": "k"},
			want: engine.Replica{ID: "r", BaseURL: res + "/openai/deployments/d%20x?api-version=2025-04-01-preview", Headers: map[string]string{"api-key": "k"}}},
		{name: "deployment on another host, Bearer asked", options: map[string]string{"base_url": "http://127.0.0.1:8", "azure_deployment": "d", "api_version": "v", "api_key": "k", "api_key_header": "Authorization"},
			want: engine.Replica{ID: "r", BaseURL: "http://127.0.0.1:8/openai/deployments/d?api-version=v", Headers: map[string]string{"Authorization": "Bearer k"}}},
		{name: "deployment on another host", options: map[string]string{"base_url": "http://127.0.0.1:8", "azure_deployment": "d", "api_version": "v", "api_key": "k"},
			want: engine.Replica{ID: "r", BaseURL: "http://127.0.0.1:8/openai/deployments/d?api-version=v", Headers: map[string]string{"api-key": "k"}}},
		{name: "v1 API", options: map[string]string{"base_url": res + "/openai/v1", "api_key": "k", "model": "my-deployment"},
			want: engine.Replica{ID: "r", BaseURL: res + "/openai/v1", UpstreamModel: "my-deployment", Headers: map[string]string{"api-key": "k"}}},
		{name: "v1 API elsewhere, api-key asked", options: map[string]string{"base_url": "http://127.0.0.1:8/openai/v1", "api_key": "k", "api_key_header": "api-key"},
			want: engine.Replica{ID: "r", BaseURL: "http://127.0.0.1:8/openai/v1", Headers: map[string]string{"api-key": "k"}}},
		{name: "v1 API preview", options: map[string]string{"base_url": res + "/openai/v1", "api_version": "preview"},
			want: engine.Replica{ID: "r", BaseURL: res + "/openai/v1?api-version=preview"}},
		{name: "no api_version", options: map[string]string{"base_url": res, "azure_deployment": "d"}, err: "needs api_version, the Azure OpenAI API version, such as 2024-10-21"},
		{name: "no base_url", options: map[string]string{"azure_deployment": "d", "api_version": "v"}, err: "needs option base_url"},
		{name: "deployment in base_url", options: map[string]string{"base_url": res + "/openai/deployments/d", "azure_deployment": "d", "api_version": "v"}, err: "already names a deployment"},
		{name: "deployment with v1 base", options: map[string]string{"base_url": res + "/openai/v1", "azure_deployment": "d", "api_version": "v"}, err: "leave azure_deployment and api_version out"},
		{name: "query in base_url", options: map[string]string{"base_url": res + "/openai/v1?api-version=x"}, err: "set the api-version with option api_version"},
		{name: "bare resource", options: map[string]string{"base_url": res}, err: "set azure_deployment and api_version, or use its v1 API with base_url " + res + "/openai/v1"},
		{name: "bad header", options: map[string]string{"base_url": res + "/openai/v1", "api_key": "k", "api_key_header": "api key"}, err: "is not a header name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := New().Start(t.Context(), engine.ReplicaSpec{Model: "m", ReplicaID: "r", Options: tc.options})
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

// standIn is a stand-in for a paid OpenAI-compatible provider: it lists
// models at /v1/models (and /openai/models, as Azure does) for key, and
// refuses other keys with 401.
func standIn(t *testing.T, key string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key && r.Header.Get("api-key") != key {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		if r.URL.Path != "/v1/models" && r.URL.Path != "/openai/models" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"gpt-x","object":"model"}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Status probes the provider: ready while it lists models for the key,
// failing with a reason a person can act on when it refuses the key, has
// no such API, or does not answer.
func TestStatusProbes(t *testing.T) {
	provider := standIn(t, "k")
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	for _, tc := range []struct {
		name    string
		options map[string]string
		want    string // the reason, or "" for ready
	}{
		{"live", map[string]string{"base_url": provider.URL + "/v1", "api_key": "k,other"}, ""},
		{"azure deployment", map[string]string{"base_url": provider.URL, "azure_deployment": "d", "api_version": "v", "api_key": "k"}, ""},
		{"wrong key", map[string]string{"base_url": provider.URL + "/v1", "api_key": "nope"}, "the provider refused the key: GET " + provider.URL + "/v1/models answered 401; check api_key"},
		{"first key refused, second taken", map[string]string{"base_url": provider.URL + "/v1", "api_key": "old,k"}, ""},
		{"every key refused", map[string]string{"base_url": provider.URL + "/v1", "api_key": "old,nope"}, "the provider refused each of its 2 keys: the provider refused the key"},
		{"dead", map[string]string{"base_url": dead.URL + "/v1", "api_key": "k"}, "unreachable: GET " + dead.URL + "/v1/models: "},
		{"probing off", map[string]string{"base_url": dead.URL + "/v1", "probe_interval": "0"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := New()
			if _, err := e.Start(t.Context(), engine.ReplicaSpec{Model: "m", ReplicaID: "r", Options: tc.options}); err != nil {
				t.Fatal(err)
			}
			st, err := e.Status(t.Context(), "r")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == "" {
				if st.State != engine.StateReady {
					t.Errorf("got %+v, want ready", st)
				}
				return
			}
			if st.State != engine.StateFailing || !strings.Contains(st.Message, tc.want) || strings.Contains(st.Message, "nope") {
				t.Errorf("got %+v, want failing with %q (and no key)", st, tc.want)
			}
		})
	}
}
