package llmctl

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// runPaced runs "llmgw ctl --admin <url> args…" with short pacing, so
// that a wait of a few hundred milliseconds shows progress lines.
func runPaced(t *testing.T, url string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("LLMGW_ADMIN_TOKEN", "")
	var out, errOut bytes.Buffer
	c := &ctl{out: &out, errOut: &errOut, pace: pacing{quiet: 20 * time.Millisecond, every: 40 * time.Millisecond, polls: 30 * time.Millisecond}}
	root := &cobra.Command{Use: "ctl", SilenceUsage: true, SilenceErrors: true}
	c.register(root)
	root.SetArgs(append([]string{"--admin", url}, args...))
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// TestDrainWait: drain --wait returns once the node holds no replicas,
// with progress lines on stderr saying how many are left.
func TestDrainWait(t *testing.T) {
	var polls atomic.Int32
	var stuck atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /llm/nodes/gpu-2/drain":
			_, _ = io.WriteString(w, `{"node":"gpu-2","drained":true}`)
		case "GET /llm/nodes":
			n := max(0, 2-int(polls.Add(1))/3) // 2 replicas, then 1, then none
			if stuck.Load() {
				n = 2
			}
			node := llmapi.NodeInfo{Name: "gpu-2", Replicas: make([]llmapi.NodeReplica, n)}
			_ = json.NewEncoder(w).Encode(llmapi.NodesStatus{Nodes: []llmapi.NodeInfo{node}})
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL)
		}
	}))
	defer srv.Close()
	out, errOut, err := runPaced(t, srv.URL, "nodes", "drain", "gpu-2", "--wait")
	if err != nil {
		t.Fatal(err)
	}
	check(t, "stdout", out, "node gpu-2 drained\nnode gpu-2 holds no replicas\n")
	if !strings.Contains(errOut, "draining node gpu-2: ") || !strings.Contains(errOut, "2 replicas left\n") || !strings.Contains(errOut, "1 replicas left\n") {
		t.Errorf("stderr: got %q, want progress lines with the replicas left", errOut)
	}

	// A node that never empties: the wait fails, saying so, exit 1.
	stuck.Store(true)
	_, _, err = runPaced(t, srv.URL, "nodes", "drain", "gpu-2", "--wait", "--timeout", "100ms")
	if err == nil || !strings.Contains(err.Error(), "node gpu-2 still holds 2 replicas after 100ms") {
		t.Errorf("a drain that does not end: got %v", err)
	}
}

// TestUpdateShowsFetchProgress: while model update waits for its
// answer, stderr shows the weights fetch's percent and rate.
func TestUpdateShowsFetchProgress(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "POST /llm/models/chat/update":
			time.Sleep(200 * time.Millisecond)
			_ = json.NewEncoder(w).Encode(llmapi.VersionRollout{From: "v1", To: "v2", Rollout: llmapi.Rollout{ModelStatus: llmapi.ModelStatus{Name: "chat"}}})
		case "GET /llm/mirror":
			_ = json.NewEncoder(w).Encode(llmapi.MirrorView{Transfers: []mirror.Progress{{Model: "chat", Bytes: 1 << 29, Total: 1 << 30, Rate: 100 << 20}}})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	out, errOut, err := runPaced(t, srv.URL, "model", "update", "chat")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "model chat: version v1 → v2\n") {
		t.Errorf("stdout: got %q", out)
	}
	if !strings.Contains(errOut, "update of model chat: 0s  fetching weights 50% (512 MiB of 1.0 GiB) at 100 MiB/s\n") {
		t.Errorf("stderr: got %q, want the fetch's percent and rate", errOut)
	}
}

// TestQuickCallShowsNothing: an answer within the quiet time prints no
// progress line.
func TestQuickCallShowsNothing(t *testing.T) {
	a := newAdmin(t, map[string]answer{"GET /llm/models": {body: []any{}}})
	_, errOut, err := run(t, a, "models")
	if err != nil || errOut != "" {
		t.Errorf("got %v, stderr %q; want nothing on stderr", err, errOut)
	}
}
