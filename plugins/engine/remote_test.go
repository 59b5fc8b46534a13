package engine

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Status probes at most once per interval and answers the last result in
// between; a provider that comes back is ready at the next probe.
func TestRemoteStatusProbesOncePerInterval(t *testing.T) {
	var hits, failing atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing.Load() == 1 {
			w.WriteHeader(http.StatusBadGateway)
		}
	}))
	defer srv.Close()
	clock := time.Unix(1000, 0)
	e := Remote{Now: func() time.Time { return clock }}
	e.Watch("r", ProbeFor(Replica{BaseURL: srv.URL + "/v1"}, 200*time.Millisecond))
	failing.Store(1)
	for range 3 {
		st, err := e.Status(context.Background(), "r")
		if err != nil || st.State != StateFailing || !strings.Contains(st.Message, "the provider is failing: GET "+srv.URL+"/v1/models answered 502") {
			t.Fatalf("got %+v, %v; want failing with the status", st, err)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("three Status calls within the interval probed %d times, want 1", n)
	}
	failing.Store(0)
	clock = clock.Add(200 * time.Millisecond)
	if st, _ := e.Status(context.Background(), "r"); st.State != StateReady || hits.Load() != 2 {
		t.Errorf("after the interval: got %+v with %d probes, want ready after a second probe", st, hits.Load())
	}

	var off Remote
	off.Add("x") // not probed: ready, as before probing existed
	if st, err := off.Status(context.Background(), "x"); err != nil || st.State != StateReady {
		t.Errorf("an unprobed replica: got %+v, %v", st, err)
	}
}
