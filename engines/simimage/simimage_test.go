package simimage

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
)

// The test binary doubles as the replica server: the engine under test
// runs it with this variable set.
const replicaEnv = "LLMGW_SIMIMAGE_TEST_REPLICA"

func TestMain(m *testing.M) {
	if os.Getenv(replicaEnv) == "1" {
		if err := RunReplica(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func newTestEngine(t *testing.T) *Engine {
	t.Setenv(replicaEnv, "1")
	e := New(hclog.NewNullLogger())
	e.Command = []string{os.Args[0]}
	t.Cleanup(e.Shutdown)
	return e
}

// The engine passes the plugin conformance suite, directly and over
// gRPC, with a real replica process.
func TestConformance(t *testing.T) {
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "pictures", Options: map[string]string{"step_time": "1ms"}}, ProbePath: "/object_info"}
	t.Run("direct", func(t *testing.T) { enginetest.Run(t, newTestEngine(t), opts) })
	t.Run("grpc", func(t *testing.T) { enginetest.Run(t, enginetest.OverGRPC(t, newTestEngine(t)), opts) })
}

// A replica process serves ComfyUI's API on loopback, lists its model's
// checkpoint, and refuses options it does not know before it starts.
func TestReplicaProcess(t *testing.T) {
	e := newTestEngine(t)
	ctx := context.Background()
	if _, err := e.Start(ctx, engine.ReplicaSpec{Model: "m", ReplicaID: "bad", Options: map[string]string{"steps_time": "1ms"}}); err == nil ||
		!strings.Contains(err.Error(), "steps_time") {
		t.Errorf("an unknown option: %v", err)
	}
	if _, err := e.Start(ctx, engine.ReplicaSpec{Model: "m", ReplicaID: "bad2", Args: []string{"--listen", "0.0.0.0:9"}}); err == nil {
		t.Error("args that move the replica off loopback were accepted")
	}
	r, err := e.Start(ctx, engine.ReplicaSpec{Model: "sdxl", ReplicaID: "r1", Options: map[string]string{"step_time": "1ms"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.BaseURL, "http://127.0.0.1:") || !strings.HasSuffix(r.HealthURL, "/system_stats") {
		t.Errorf("replica: %+v", r)
	}
	var ckpts []string
	getJSON(t, r.BaseURL+"/models/checkpoints", &ckpts)
	if len(ckpts) != 1 || ckpts[0] != "sdxl.safetensors" {
		t.Errorf("checkpoints: %v", ckpts)
	}
	code, out := postJSON(t, r.BaseURL+"/prompt", `{"prompt":`+txt2img+`}`)
	if code != 200 {
		t.Fatalf("POST /prompt: %d %v", code, out)
	}
	id := out["prompt_id"].(string)
	var hist map[string]map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for getJSON(t, r.BaseURL+"/history/"+id, &hist); len(hist) == 0; getJSON(t, r.BaseURL+"/history/"+id, &hist) {
		if time.Now().After(deadline) {
			t.Fatal("the prompt did not finish")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := hist[id]["status"].(map[string]any); st["status_str"] != "success" {
		t.Errorf("status: %v", st)
	}
	if err := e.Stop(ctx, "r1", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(r.BaseURL + "/system_stats"); err == nil {
		t.Error("the replica still answers after Stop")
	}
}
