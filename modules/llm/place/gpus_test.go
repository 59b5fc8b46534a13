package place

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// gpusLedger is a ledger of a node with the given GPU devices.
func gpusLedger(t *testing.T, devs []int) *Ledger {
	t.Helper()
	l := &Ledger{}
	l.capacity.Store(&catalog.Resources{Memory: 64 << 30, Cores: 16})
	if err := l.SetGPUDevices(nil, devs); err != nil {
		t.Fatal(err)
	}
	return l
}

func gpusFleet(name string, gpus int, class string) *testHolder {
	f := &testHolder{m: &catalog.Model{Name: name, Engine: "sim", Class: class, Resources: &catalog.Resources{GPUs: gpus}}}
	return f
}

// TestGPUDevicesDisjoint reserves replicas on a node of four devices:
// each gets devices no other holds, lowest first; one that does not fit
// waits with a reason naming the devices in use; released devices go to
// the next replica.
func TestGPUDevicesDisjoint(t *testing.T) {
	l := gpusLedger(t, nil)
	l.capacity.Store(&catalog.Resources{Memory: 64 << 30, Cores: 16, GPUs: 4})
	if err := l.SetGPUDevices(nil, nil); err != nil {
		t.Fatal(err)
	}
	a := gpusFleet("a", 2, "")
	p1, _, why := l.Reserve(a)
	if p1 == nil || !slices.Equal(p1.GPUs, []int{0, 1}) {
		t.Fatalf("first replica: got %v (%q), want devices [0 1]", p1, why)
	}
	l.Bind(p1, &testReplica{id: "a-1", started: time.Now()})
	// The plan names the devices a real start then gets, and changes nothing.
	pl := l.PlanOn(a.m, 2, "n1")
	if pl.Fits || len(pl.Replicas) != 1 || !slices.Equal(pl.Replicas[0].GPUs, []int{2, 3}) {
		t.Fatalf("plan of two more replicas of a: %+v, want one on devices [2 3], the second missing", pl)
	}
	p2, _, _ := l.Reserve(a)
	if p2 == nil || !slices.Equal(p2.GPUs, []int{2, 3}) {
		t.Fatalf("second replica: got %v, want devices [2 3]", p2)
	}
	// p2 is still starting (not bound): its devices are held all the same.
	b := gpusFleet("b", 1, "")
	p3, _, why := l.Reserve(b)
	if p3 != nil {
		t.Fatalf("b placed on %v while a holds every device", p3.GPUs)
	}
	for _, want := range []string{"1 GPUs", "0,1 by a-1", "2,3 by a replica of a that is starting"} {
		if !strings.Contains(why, want) {
			t.Fatalf("reason %q does not say %q", why, want)
		}
	}
	if u := l.Status().GPUDevices; u == nil || !slices.Equal(u.All, []int{0, 1, 2, 3}) || len(u.Free) != 0 {
		t.Fatalf("node status with every device held: %+v", u)
	}
	l.Release(p1)
	if u := l.Status().GPUDevices; !slices.Equal(u.Free, []int{0, 1}) {
		t.Fatalf("node status after a-1 stopped: %+v, want 0 and 1 free", u)
	}
	p3, _, why = l.Reserve(b)
	if p3 == nil || !slices.Equal(p3.GPUs, []int{0}) {
		t.Fatalf("after a-1 stopped: got %v (%q), want b on device 0", p3, why)
	}
	p4, _, _ := l.Reserve(b)
	if p4 == nil || !slices.Equal(p4.GPUs, []int{1}) {
		t.Fatalf("second b: got %v, want device 1", p4)
	}
	if p5, _, why := l.Reserve(b); p5 != nil || !strings.Contains(why, "0 by a replica of b") {
		t.Fatalf("third b: got %v, %q; want it to wait naming device 0", p5, why)
	}
}

// TestGPUDevicesEviction: a critical replica that needs the devices of an
// opportunistic one gets exactly those.
func TestGPUDevicesEviction(t *testing.T) {
	l := gpusLedger(t, []int{1, 3})
	if c := l.Capacity(); c.GPUs != 2 {
		t.Fatalf("gpu_devices 1,3: capacity %d GPUs, want 2", c.GPUs)
	}
	batch := gpusFleet("batch", 1, catalog.ClassOpportunistic)
	p1, _, _ := l.Reserve(batch)
	l.Bind(p1, &testReplica{id: "batch-1", started: time.Now()})
	p2, _, _ := l.Reserve(batch)
	l.Bind(p2, &testReplica{id: "batch-2", started: time.Now()})
	if !slices.Equal(p1.GPUs, []int{1}) || !slices.Equal(p2.GPUs, []int{3}) {
		t.Fatalf("batch: got %v and %v, want [1] and [3]", p1.GPUs, p2.GPUs)
	}
	crit := gpusFleet("crit", 1, catalog.ClassCritical)
	p, victims, why := l.Reserve(crit)
	if p == nil || len(victims) != 1 {
		t.Fatalf("critical: got %v, %v, %q; want one victim", p, victims, why)
	}
	if !slices.Equal(p.GPUs, victims[0].GPUs) {
		t.Fatalf("critical got %v; its victim held %v", p.GPUs, victims[0].GPUs)
	}
	// Its engine starts once the victim's process has stopped and given
	// the device back, not before.
	done := make(chan struct{})
	go func() { l.AwaitGPUs(context.Background(), p, time.Minute); close(done) }()
	select {
	case <-done:
		t.Fatal("awaitGPUs returned while the victim still holds the device")
	case <-time.After(200 * time.Millisecond):
	}
	l.ReleaseReplica(victims[0].rep)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("awaitGPUs did not return once the victim stopped")
	}
}

func TestGPUDevicesList(t *testing.T) {
	for _, tc := range []struct {
		name     string
		declared []int
		visible  string
		n        int
		want     []int
		err      bool
	}{
		{"detected", nil, "", 3, []int{0, 1, 2}, false},
		{"none", nil, "", 0, []int{}, false},
		{"declared", []int{0, 2, 3}, "", 8, []int{0, 2, 3}, false},
		{"visible to the gateway", nil, "2,3", 4, []int{2, 3}, false},
		{"visible, node declares fewer", nil, "2,3,5", 2, []int{2, 3}, false},
		{"visible as UUIDs", nil, "GPU-1234", 2, []int{0, 1}, false},
		{"declared twice", []int{1, 1}, "", 0, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GPUDevices(tc.declared, tc.visible, tc.n)
			if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v, want %v (error %v)", got, err, tc.want, tc.err)
			}
		})
	}
	l := &Ledger{}
	l.capacity.Store(&catalog.Resources{GPUs: 4})
	if err := l.SetGPUDevices(&catalog.Resources{GPUs: 4}, []int{0, 1}); err == nil {
		t.Fatal("gpus 4 with gpu_devices 0,1: no error")
	}
}
