package place

import (
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// TestPlanMatchesReserve plans a model on a full node and then reserves
// its replica for real: the plan names the replica reserve stops, and
// leaves the ledger as it was.
func TestPlanMatchesReserve(t *testing.T) {
	const gib = 1 << 30
	l := &Ledger{}
	l.capacity.Store(&catalog.Resources{Memory: 8 * gib, Cores: 8})
	running := func(name, class string, mem int64, id string) {
		m := &catalog.Model{Name: name, Engine: "sim", Class: class, Resources: &catalog.Resources{Memory: mem}}
		f := &testHolder{m: m}
		l.places = append(l.places, &Placement{holder: f, need: m.Needs(), rank: catalog.ClassRank(class),
			rep: &testReplica{id: id, started: time.Now()}})
	}
	running("batch", catalog.ClassOpportunistic, 4*gib, "batch-1")
	running("chat", catalog.ClassStandard, 3*gib, "chat-1")

	m := &catalog.Model{Name: "new", Engine: "sim", Resources: &catalog.Resources{Memory: 4 * gib}}
	pl := l.PlanOn(m, 1, "n1")
	if !pl.Fits || len(pl.Replicas) != 1 || pl.Replicas[0].Node != "n1" || len(pl.Evict) != 1 || pl.Evict[0].Replica != "batch-1" {
		t.Fatalf("plan: got %+v, want one replica on n1 stopping batch-1", pl)
	}
	for _, q := range l.places {
		if q.evicted {
			t.Fatal("the plan changed the ledger")
		}
	}
	f := &testHolder{m: m}
	p, victims, why := l.Reserve(f)
	if p == nil || why != "" || len(victims) != 1 || victims[0].rep.ReplicaID() != pl.Evict[0].Replica {
		t.Fatalf("reserve: got %v %v %q; the plan said %+v", p, victims, why, pl.Evict)
	}

	// A critical model bigger than what can be freed: the plan says what
	// is missing.
	big := &catalog.Model{Name: "big", Engine: "sim", Class: catalog.ClassCritical, Resources: &catalog.Resources{Memory: 16 * gib}}
	pl = l.PlanOn(big, 1, "n1")
	if pl.Fits || pl.Missing == nil || pl.Missing.Memory != 12*gib || pl.Reason == "" {
		t.Fatalf("too big: got %+v, want 12 GiB missing (the new replica is still starting, so it is not stopped)", pl)
	}
	// Two replicas where 1 GiB is free: the first takes it, the second
	// is counted against what the first took.
	if pl2 := l.PlanOn(&catalog.Model{Name: "two", Engine: "sim", Resources: &catalog.Resources{Memory: 1 * gib}}, 2, "n1"); pl2.Fits || len(pl2.Replicas) != 1 || pl2.Missing.Memory != 1*gib {
		t.Fatalf("two replicas, room for one: got %+v", pl2)
	}
}
