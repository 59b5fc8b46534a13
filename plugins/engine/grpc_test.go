package engine

import (
	"context"
	"fmt"
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
		Options: []Option{{Name: "ttft", Type: TypeDuration, Description: "time to first token"}, {Name: "param_*"},
			{Name: "base_url", Required: true, Example: "https://api.example.com/v1"}, {Name: "api_key", Secret: true}},
		ReservedArgs: []string{"--host", "--port"}, ArgFlags: []string{"--ttft"}, Example: "name: x\nengine: x\n"}
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

// echoAdapters starts a replica that reports the spec's adapters.
type echoAdapters struct{ infoOnly }

func (echoAdapters) Start(_ context.Context, s ReplicaSpec) (Replica, error) {
	r := Replica{ID: s.ReplicaID, Adapters: map[string]string{}}
	for _, a := range s.Adapters {
		r.Adapters[a.Name] = fmt.Sprintf(`{"path":%q,"scale":%g}`, a.Path, a.ScaleOr1())
	}
	return r, nil
}

// A spec's adapters reach the plugin, and the replica's come back.
func TestAdaptersOverGRPC(t *testing.T) {
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{PluginName: &GRPCPlugin{Impl: echoAdapters{}}})
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(PluginName)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := raw.(Engine).Start(context.Background(), ReplicaSpec{Model: "m", ReplicaID: "m-1",
		Adapters: []Adapter{{Name: "m-sql", Path: "/a/sql.gguf", Scale: 0.5}, {Name: "m-chat", Path: "/a/chat.gguf"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"m-sql": `{"path":"/a/sql.gguf","scale":0.5}`, "m-chat": `{"path":"/a/chat.gguf","scale":1}`}
	if d := cmp.Diff(want, rep.Adapters); d != "" {
		t.Errorf("adapters over gRPC (-want +got):\n%s", d)
	}
}
