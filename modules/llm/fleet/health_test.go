package fleet

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/plugins/engine"
	"go.uber.org/zap"
)

// A replica its engine reports failing is not counted ready, gets no
// request (the caller is told why at once), and is shown with the
// reason; once the engine says ready it serves again.
func TestFailingReplica(t *testing.T) {
	one := 1
	m := &catalog.Model{Name: "gpt", Engine: "openai", Scaling: &catalog.Scaling{Min: &one, Max: &one}}
	f := New(m, nil, zap.NewNop(), Options{HoldTimeout: time.Minute, MaxWaiting: 10})
	defer f.cancel()
	r := &Replica{ID: "gpt-1", Model: "gpt", BaseURL: "http://127.0.0.1:1/v1", idle: make(chan struct{}, 1)}
	r.state.Store(ReplicaReady)
	f.replicas = []*Replica{r}

	const why = "unreachable: GET http://127.0.0.1:1/v1/models: connection refused; check base_url and that the provider is up"
	f.health(r, engine.Status{State: engine.StateFailing, Message: why})
	if n := f.ReadyCount(); n != 0 {
		t.Errorf("ready count of a failing provider: got %d, want 0", n)
	}
	st := f.Status()
	if st.State != "failing" || st.Reason != why || st.Replicas[0].State != "failing" || st.Replicas[0].Reason != why {
		t.Errorf("status: got %s (%s), replica %+v; want failing with the reason", st.State, st.Reason, st.Replicas[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := f.Acquire(ctx, LeastOutstanding{}, nil)
	var nc *NoCapacityError
	if !errors.As(err, &nc) || !strings.Contains(nc.Reason, "its provider is failing: "+why) {
		t.Fatalf("a request for a failing provider: got %v, want at once a no-capacity error with the reason", err)
	}

	f.health(r, engine.Status{State: engine.StateReady})
	got, err := f.Acquire(ctx, LeastOutstanding{}, nil)
	if err != nil || got != r {
		t.Fatalf("once ready again: got %v, %v; want the replica", got, err)
	}
	f.Release(r)
	if st := f.Status(); st.State != "ready" || st.Replicas[0].Reason != "" {
		t.Errorf("status once ready again: got %+v", st)
	}
}

// Test probes the replicas with their first key and says what it found.
func TestFleetTest(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k1" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	}))
	defer provider.Close()
	f := New(&catalog.Model{Name: "gpt", Engine: "openai"}, nil, zap.NewNop(), Options{})
	defer f.cancel()
	good := &Replica{ID: "a", BaseURL: provider.URL + "/v1", Header: http.Header{"Authorization": {"Bearer k1", "Bearer k2"}}}
	bad := &Replica{ID: "b", BaseURL: provider.URL + "/v1", Header: http.Header{"Authorization": {"Bearer nope"}}}
	f.replicas = []*Replica{good, bad}
	got := f.Test(context.Background(), http.DefaultClient)
	if !got.OK || len(got.Replicas) != 2 || got.Replicas[0].Status != 200 || got.Replicas[1].Status != 401 ||
		!strings.Contains(got.Replicas[1].Reason, "refused the key") || got.Replicas[0].URL != provider.URL+"/v1/models" {
		t.Errorf("got %+v", got)
	}
	f.replicas = nil
	if got := f.Test(context.Background(), http.DefaultClient); got.OK || !strings.Contains(got.Reason, "no replica of it runs on this node") {
		t.Errorf("no replica: got %+v", got)
	}
}
