package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/go-plugin"
)

type infoOnly struct{ info Info }

func (e infoOnly) Info(context.Context) (Info, error) { return e.info, nil }
func (infoOnly) Start(context.Context, ReplicaSpec) (Replica, error) {
	return Replica{}, nil
}
func (infoOnly) Status(context.Context, string) (Status, error)    { return Status{}, nil }
func (infoOnly) Stop(context.Context, string, time.Duration) error { return nil }

// Info's declarations cross the plugin protocol whole.
func TestInfoOverGRPC(t *testing.T) {
	want := Info{Type: "x", Version: "1", Protocol: ProtocolVersion, Capabilities: []string{CapChat}, Formats: []string{"gguf"},
		Options:      []Option{{Name: "ttft", Type: TypeDuration, Description: "time to first token"}, {Name: "param_*"}},
		ReservedArgs: []string{"--host", "--port"}, ArgFlags: []string{"--ttft"}}
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &GRPCPlugin{Impl: infoOnly{want}}})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	got, err := raw.(Engine).Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Info over gRPC (-want +got):\n%s", d)
	}
}
