// Package enginetest is the conformance suite every engine plugin must
// pass. Run it against the engine itself and, through OverGRPC, against
// the engine as the gateway sees it across the plugin protocol.
package enginetest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"

	"github.com/llmgw/llmgw/plugins/engine"
)

// Options tune the suite for an engine.
type Options struct {
	// Spec starts the replica under test; ReplicaID is filled in.
	Spec engine.ReplicaSpec
	// ProbePath, when set, is fetched from the replica's base URL and must
	// answer 200 (for instance "/models").
	ProbePath string
	// StartTimeout bounds Start. Default: 60s.
	StartTimeout time.Duration
}

// Run checks Info, Start, Status and Stop, how unknown replicas are
// reported, and that a replica process that dies is reported so (not
// ready) for the gateway to replace.
func Run(t *testing.T, eng engine.Engine, o Options) {
	t.Helper()
	if o.StartTimeout == 0 {
		o.StartTimeout = 60 * time.Second
	}
	ctx := context.Background()
	info, err := eng.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Type == "" || info.Version == "" || len(info.Capabilities) == 0 || len(info.Formats) == 0 {
		t.Errorf("Info is incomplete: %+v", info)
	}
	checkDeclarations(t, info)
	if _, err := eng.Status(ctx, "no-such-replica"); !errors.Is(err, engine.ErrUnknownReplica) {
		t.Errorf("Status of an unknown replica: got %v, want ErrUnknownReplica", err)
	}
	if err := eng.Stop(ctx, "no-such-replica", 0); !errors.Is(err, engine.ErrUnknownReplica) {
		t.Errorf("Stop of an unknown replica: got %v, want ErrUnknownReplica", err)
	}
	spec := o.Spec
	spec.ReplicaID = "conformance-" + strings.ReplaceAll(t.Name(), "/", "-")
	sctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	rep, err := eng.Start(sctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer func() { _ = eng.Stop(ctx, rep.ID, 0) }()
	if rep.ID != spec.ReplicaID {
		t.Errorf("Start returned id %q, want the one asked for, %q", rep.ID, spec.ReplicaID)
	}
	if !strings.HasPrefix(rep.BaseURL, "http://") && !strings.HasPrefix(rep.BaseURL, "https://") {
		t.Errorf("BaseURL %q is not an http(s) URL", rep.BaseURL)
	}
	if u, err := url.Parse(rep.BaseURL); rep.PID != 0 && (err != nil || !loopback(u.Hostname())) {
		t.Errorf("BaseURL %q of a local replica is not on loopback", rep.BaseURL)
	}
	refuseReserved(t, eng, info, spec)
	if o.ProbePath != "" {
		resp, err := http.Get(rep.BaseURL + o.ProbePath)
		if err != nil {
			t.Fatalf("the replica does not answer: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s%s: %d, want 200", rep.BaseURL, o.ProbePath, resp.StatusCode)
		}
	}
	st, err := eng.Status(ctx, rep.ID)
	if err != nil || st.State != engine.StateReady {
		t.Errorf("Status after Start: got %+v, %v, want ready", st, err)
	}
	if err := eng.Stop(ctx, rep.ID, time.Second); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if _, err := eng.Status(ctx, rep.ID); !errors.Is(err, engine.ErrUnknownReplica) {
		t.Errorf("Status after Stop: got %v, want ErrUnknownReplica", err)
	}
	if o.ProbePath != "" {
		if resp, err := http.Get(rep.BaseURL + o.ProbePath); err == nil {
			resp.Body.Close()
			t.Errorf("the replica still answers after Stop")
		}
	}
	if rep.PID == 0 {
		return // not a local process: nothing to crash
	}
	// A crash: the replica's process is killed; Status must say so.
	spec.ReplicaID += "-crash"
	sctx2, cancel2 := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel2()
	crash, err := eng.Start(sctx2, spec)
	if err != nil {
		t.Fatalf("Start (for the crash): %v", err)
	}
	defer func() { _ = eng.Stop(ctx, crash.ID, 0) }()
	if err := syscall.Kill(int(crash.PID), syscall.SIGKILL); err != nil {
		t.Fatalf("killing the replica: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := eng.Status(ctx, crash.ID)
		if err != nil || st.State == engine.StateExited || st.State == engine.StateFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("Status of a killed replica is still %+v after 10s; want exited or failed", st)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// OverGRPC serves impl over the plugin protocol in-process and returns the
// client side, so the suite also checks the protobuf conversions.
func OverGRPC(t *testing.T, impl engine.Engine) engine.Engine {
	t.Helper()
	client, _ := plugin.TestPluginGRPCConn(t, false, map[string]plugin.Plugin{
		engine.PluginName: &engine.GRPCPlugin{Impl: impl},
	})
	// Closing the client shuts the server down through go-plugin's controller;
	// stopping it here as well would race with that.
	t.Cleanup(func() { _ = client.Close() })
	raw, err := client.Dispense(engine.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	return raw.(engine.Engine)
}

// checkDeclarations checks that declared options have names and known
// types.
func checkDeclarations(t *testing.T, info engine.Info) {
	t.Helper()
	types := []string{"", engine.TypeString, engine.TypeInteger, engine.TypeNumber, engine.TypeBool, engine.TypeDuration}
	for _, o := range info.Options {
		if o.Name == "" || o.Name == "*" || !slices.Contains(types, o.Type) {
			t.Errorf("Info declares option %+v: it needs a name and a type among %q", o, types)
		}
	}
	for _, r := range info.ReservedArgs {
		if !strings.HasPrefix(r, "-") {
			t.Errorf("Info reserves %q, which is not a flag", r)
		}
	}
}

// refuseReserved checks that Start refuses each reserved flag in args,
// whatever the gateway checked before.
func refuseReserved(t *testing.T, eng engine.Engine, info engine.Info, spec engine.ReplicaSpec) {
	t.Helper()
	for _, r := range info.ReservedArgs {
		s := spec
		s.ReplicaID += "-reserved"
		s.Args = append(append([]string{}, spec.Args...), r, "0.0.0.0")
		rep, err := eng.Start(context.Background(), s)
		if err == nil {
			_ = eng.Stop(context.Background(), rep.ID, 0)
			t.Errorf("Start with args %q succeeded (%s); want it refused: %s is reserved", s.Args, rep.BaseURL, r)
		}
	}
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
