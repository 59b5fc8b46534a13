package proc

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/plugins/engine"
)

func TestStatusLifecycle(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer health.Close()
	tab := &Table{Logger: hclog.NewNullLogger()}
	p := &Process{ID: "r1", Cmd: exec.Command("sleep", "60"), BaseURL: health.URL, HealthURL: health.URL}
	if err := tab.Start(t.Context(), p, false, "", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	defer tab.StopAll(0)
	st, err := tab.Status("r1")
	if err != nil || st.State != engine.StateReady || st.PID == 0 {
		t.Fatalf("got %+v %v, want ready with a pid", st, err)
	}
	healthy.Store(false)
	for i := 1; i <= MaxMisses; i++ {
		st, _ = tab.Status("r1")
		want := engine.StateReady
		if i == MaxMisses {
			want = engine.StateFailed
		}
		if st.State != want {
			t.Fatalf("after %d missed checks: got %s, want %s", i, st.State, want)
		}
	}
	healthy.Store(true)
	if st, _ = tab.Status("r1"); st.State != engine.StateReady {
		t.Fatalf("after recovering: got %s, want ready", st.State)
	}
	_ = syscall.Kill(int(st.PID), syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for st.State != engine.StateExited && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		st, _ = tab.Status("r1")
	}
	if st.State != engine.StateExited || !strings.Contains(st.Message, "killed") {
		t.Errorf("after kill: got %+v, want exited", st)
	}
	if err := tab.Stop("r1", 0); err != nil {
		t.Errorf("stopping an exited process: %v", err)
	}
	if _, err := tab.Status("r1"); !errors.Is(err, engine.ErrUnknownReplica) {
		t.Errorf("after Stop: got %v, want ErrUnknownReplica", err)
	}
}

func TestStartFailures(t *testing.T) {
	tab := &Table{Logger: hclog.NewNullLogger()}
	p := &Process{ID: "x", Cmd: exec.Command("sh", "-c", "exit 3")}
	err := tab.Start(t.Context(), p, true, "/v1", 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "before listening") && !strings.Contains(err.Error(), "closed stdout") {
		t.Errorf("a server that exits at once: got %v", err)
	}
	p = &Process{ID: "y", Cmd: exec.Command("sleep", "60")}
	err = tab.Start(t.Context(), p, true, "/v1", 200*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not listen") {
		t.Errorf("a server that never listens: got %v", err)
	}
	if _, err := tab.Status("y"); !errors.Is(err, engine.ErrUnknownReplica) {
		t.Errorf("a failed start is still in the table: %v", err)
	}
}
