package place

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// profiled is a model with a GPU profile (1 GPU, 8GiB) and a CPU one (4
// cores, 8GiB).
func profiled(name, class, prefer string, gpuFirst bool) *catalog.Model {
	gpu := &catalog.Profile{Name: "gpu", Engine: "sim", Resources: &catalog.Resources{GPUs: 1, Memory: 8 << 30}}
	cpu := &catalog.Profile{Name: "cpu", Engine: "sim", Resources: &catalog.Resources{Cores: 4, Memory: 8 << 30}}
	m := &catalog.Model{Name: name, Engine: "sim", Class: class, Prefer: prefer, Profiles: []*catalog.Profile{gpu, cpu}}
	if !gpuFirst {
		m.Profiles = []*catalog.Profile{cpu, gpu}
	}
	return m
}

func newTestLedger(c catalog.Resources) *Ledger {
	l := &Ledger{}
	l.capacity.Store(&c)
	return l
}

func profileOf(h Holder, p *Placement) string { return h.Model().Shape(p.Profile).ProfileName() }

func TestReserveProfiles(t *testing.T) {
	l := newTestLedger(catalog.Resources{GPUs: 1, Cores: 8, Memory: 64 << 30})
	a := &testHolder{m: profiled("a", "", "", true)}
	p, _, why := l.Reserve(a)
	if p == nil || profileOf(a, p) != "gpu" {
		t.Fatalf("first replica: %v %q, want the gpu profile", p, why)
	}
	l.Bind(p, &testReplica{id: "a-1"})
	// The GPU is taken: the next replica falls back to the CPU profile,
	// and says why.
	p2, _, why := l.Reserve(a)
	if p2 == nil || profileOf(a, p2) != "cpu" || !strings.Contains(p2.Note, "profile gpu") {
		t.Fatalf("second replica: %+v %q, want the cpu profile with a note on gpu", p2, why)
	}
	l.Bind(p2, &testReplica{id: "a-2"})
	// Nothing better while the GPU is held; once it is free, the CPU
	// replica can move back.
	if b := l.ReserveBetter(a, p2.Profile); b != nil {
		t.Fatalf("moved back while the GPU is held: %+v", b)
	}
	l.Release(p)
	b := l.ReserveBetter(a, p2.Profile)
	if b == nil || profileOf(a, b) != "gpu" {
		t.Fatalf("move back with the GPU free: %+v", b)
	}
}

func TestReserveProfilesCPUWhileGPUsFree(t *testing.T) {
	// The CPU profile is listed first: while the GPU is free, it is not
	// taken, and the replica goes to the GPU profile.
	l := newTestLedger(catalog.Resources{GPUs: 1, Cores: 8, Memory: 64 << 30})
	c := &testHolder{m: profiled("c", "", "", false)}
	if p, _, why := l.Reserve(c); p == nil || profileOf(c, p) != "gpu" {
		t.Fatalf("cpu-first model: %+v %q, want the gpu profile", p, why)
	}
	// A GPU profile that cannot fit for memory while the GPU is free: the
	// CPU profile is refused, with the reason naming prefer cpu.
	l = newTestLedger(catalog.Resources{GPUs: 1, Cores: 8, Memory: 64 << 30})
	big := profiled("big", "", "", true)
	big.Profiles[0].Resources.Memory = 128 << 30
	h := &testHolder{m: big}
	p, _, why := l.Reserve(h)
	if p != nil || !strings.Contains(why, "on the CPU while 1 GPU is free") || !strings.Contains(why, "prefer cpu") {
		t.Fatalf("big model: %+v %q, want a refusal naming prefer cpu", p, why)
	}
	plan := l.PlanOn(big, 1, "n1")
	if plan.Fits || !strings.Contains(plan.Reason, "prefer cpu") {
		t.Fatalf("plan: %+v", plan)
	}
	// prefer cpu: the same model runs on the CPU.
	big.Prefer = catalog.PreferCPU
	if p, _, why := l.Reserve(h); p == nil || profileOf(h, p) != "cpu" {
		t.Fatalf("prefer cpu: %+v %q, want the cpu profile", p, why)
	}
	plan = l.PlanOn(big, 1, "n1")
	if !plan.Fits || plan.Replicas[0].Profile != "cpu" || !strings.Contains(plan.Replicas[0].Note, "profile gpu") {
		t.Fatalf("plan with prefer cpu: %+v", plan)
	}
}

func TestReserveProfilesEvictsOnlyWhenNoneFits(t *testing.T) {
	// An opportunistic replica holds the GPU: a critical model with
	// profiles takes the CPU profile rather than stop it; with no room on
	// the CPU either, it stops it for the GPU profile.
	l := newTestLedger(catalog.Resources{GPUs: 1, Cores: 4, Memory: 64 << 30})
	opp := &testHolder{m: &catalog.Model{Name: "opp", Engine: "sim", Class: catalog.ClassOpportunistic, Resources: &catalog.Resources{GPUs: 1}}}
	po, _, _ := l.Reserve(opp)
	l.Bind(po, &testReplica{id: "opp-1"})
	crit := &testHolder{m: profiled("crit", catalog.ClassCritical, "", true)}
	p, victims, _ := l.Reserve(crit)
	if p == nil || profileOf(crit, p) != "cpu" || len(victims) != 0 {
		t.Fatalf("first: %+v victims %d, want cpu and nobody stopped", p, len(victims))
	}
	l.Bind(p, &testReplica{id: "crit-1"})
	p, victims, why := l.Reserve(crit)
	if p == nil || profileOf(crit, p) != "gpu" || len(victims) != 1 {
		t.Fatalf("second: %+v victims %d %q, want gpu after stopping opp", p, len(victims), why)
	}
}
