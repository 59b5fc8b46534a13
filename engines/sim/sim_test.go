package sim

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/plugins/engine"
	"github.com/llmgw/llmgw/plugins/enginetest"
)

// The test binary doubles as the replica server: the engine under test
// runs it with this variable set.
const replicaEnv = "LLMGW_SIM_TEST_REPLICA"

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

func TestConformance(t *testing.T) {
	opts := enginetest.Options{Spec: engine.ReplicaSpec{Model: "m", Options: map[string]string{"max_tokens": "4"}}, ProbePath: "/models"}
	t.Run("direct", func(t *testing.T) { enginetest.Run(t, newTestEngine(t), opts) })
	t.Run("grpc", func(t *testing.T) { enginetest.Run(t, enginetest.OverGRPC(t, newTestEngine(t)), opts) })
}

func TestStartRejectsUnknownOption(t *testing.T) {
	e := newTestEngine(t)
	_, err := e.Start(t.Context(), engine.ReplicaSpec{Model: "m", ReplicaID: "x", Options: map[string]string{"colour": "red"}})
	if err == nil {
		t.Fatal("an unknown option was accepted")
	}
}

func TestStartRefusesArgs(t *testing.T) {
	e := newTestEngine(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"listen", []string{"--listen", "0.0.0.0:9"}, "args must not set --listen"},
		{"listen with =", []string{"--listen=0.0.0.0:9"}, "args must not set --listen"},
		{"single dash", []string{"-listen", "0.0.0.0:9"}, "args must not set -listen"},
		{"unknown flag", []string{"--flash-attn"}, "engine sim has no flag --flash-attn; its flags are --ttft"},
		{"bad value", []string{"--ttft", "soon"}, `invalid value "soon" for flag -ttft`},
		{"option type", nil, "engine sim option ttft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := engine.ReplicaSpec{Model: "m", ReplicaID: "x", Args: tc.args}
			if tc.args == nil {
				spec.Options = map[string]string{"ttft": "soon"}
			}
			_, err := e.Start(t.Context(), spec)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	// Flags the replica has still pass through args.
	rep, err := e.Start(t.Context(), engine.ReplicaSpec{Model: "m", ReplicaID: "ok", Args: []string{"--max-tokens", "2"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.BaseURL, "http://127.0.0.1:") {
		t.Errorf("base URL %s is not on loopback", rep.BaseURL)
	}
}
