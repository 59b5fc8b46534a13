package sim

import (
	"fmt"
	"os"
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
