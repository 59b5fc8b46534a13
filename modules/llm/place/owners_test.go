package place

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// withOwners puts a tenancy tree's capacities in force for one test.
func withOwners(t *testing.T, orgs []*tenancy.Org) *OwnerTable {
	t.Helper()
	return NewOwnerTable(orgs)
}

func TestOwnerCapacity(t *testing.T) {
	const gib = 1 << 30
	ow := withOwners(t, []*tenancy.Org{{Name: "acme", Capacity: &tenancy.Capacity{Memory: 8 * gib},
		Teams: []*tenancy.Team{{Name: "research", Capacity: &tenancy.Capacity{Replicas: 2},
			Projects: []*tenancy.Project{{Name: "alpha"}}}, {Name: "ops"}}}})
	l := &Ledger{}
	l.SetOwners(ow)
	l.capacity.Store(&catalog.Resources{Memory: 64 * gib, Cores: 16})
	running := func(name, owner string, mem int64) *testHolder {
		m := &catalog.Model{Name: name, Engine: "sim", Owner: owner, Resources: &catalog.Resources{Memory: mem}}
		f := &testHolder{m: m}
		l.places = append(l.places, &Placement{holder: f, need: m.Needs(), rank: catalog.ClassRank(""),
			rep: &testReplica{id: name + "-1", started: time.Now()}})
		return f
	}
	running("a", "acme/research/alpha", 2*gib)
	running("b", "acme/research", 2*gib)
	running("c", "acme/ops", 3*gib)
	running("free", "", 40*gib)

	cases := []struct {
		name, owner string
		mem         int64
		want        string // a part of the reason; "" fits
	}{
		{"team full by replicas", "acme/research/alpha", 0, "team acme/research: 1 replica over its capacity of 2 replicas"},
		{"org full by memory", "acme/ops", 2 * gib, "org acme: 1.0 GiB of memory over its capacity of 8.0 GiB"},
		{"org has room", "acme/ops", 1 * gib, ""},
		{"no owner", "", 10 * gib, ""},
		{"unknown owner", "other/x", 10 * gib, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &catalog.Model{Name: "new", Engine: "sim", Owner: tc.owner, Resources: &catalog.Resources{Memory: tc.mem}}
			f := &testHolder{m: m}
			pl := l.PlanOn(m, 1, "n1")
			p, _, why := l.Reserve(f)
			if p != nil {
				l.Release(p)
			}
			if tc.want == "" {
				if why != "" || !pl.Fits {
					t.Fatalf("got %q (plan %+v), want it to fit", why, pl)
				}
				return
			}
			if !strings.Contains(why, tc.want) {
				t.Fatalf("reserve: got %q, want %q", why, tc.want)
			}
			if pl.Fits || pl.Reason != why {
				t.Fatalf("plan: got fits=%v %q, want the reason reserve gives: %q", pl.Fits, pl.Reason, why)
			}
		})
	}

	// Two replicas planned at once count against each other.
	pl := l.PlanOn(&catalog.Model{Name: "two", Engine: "sim", Owner: "acme", Resources: &catalog.Resources{Memory: 1 * gib}}, 2, "n1")
	if pl.Fits || len(pl.Replicas) != 1 || !strings.Contains(pl.Reason, "org acme: 1.0 GiB of memory over") {
		t.Fatalf("two replicas, room for one: got %+v", pl)
	}
	// The owner's other model goes: the one that waited fits.
	l.places = l.places[1:] // a, of acme/research/alpha
	if why := ownerCheck(ow, "acme/research/alpha", l.places, catalog.Resources{}); why != "" {
		t.Fatalf("after removing a: got %q, want room", why)
	}
}

// The cluster's planner counts an owner's replicas on every node: the
// organisation's capacity holds across nodes, its team's too, and a
// replica on a draining node (being replaced) does not count.
func TestPlanOwnerCapacityAcrossNodes(t *testing.T) {
	ow := withOwners(t, []*tenancy.Org{{Name: "acme", Capacity: &tenancy.Capacity{Replicas: 3},
		Teams: []*tenancy.Team{{Name: "web", Capacity: &tenancy.Capacity{Memory: 8 * gib}}}}})
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0)}
	big := pmodel("big", 2, 2, 4, 1)
	big.Owner = "acme/web"
	small := pmodel("small", 2, 2, 1, 1)
	small.Owner = "acme"
	extra := pmodel("extra", 1, 1, 4, 1)
	extra.Owner = "acme/web"
	free := pmodel("free", 2, 2, 1, 1)
	next, why := Plan(nodes, []*catalog.Model{big, small, extra, free}, nil, nil, nil, t0, ow)
	// By name: big takes 2 (8 GiB, the team's all), extra finds the team
	// full, free has no owner, small gets 1 of its 2 (the org's third).
	if got := len(next["big"]) + len(next["small"]) + len(next["extra"]); got != 3 || len(next["free"]) != 2 {
		t.Fatalf("got %v, want 3 replicas of acme's models and 2 of free", next)
	}
	if w := why["extra"]; w != ownerReason("team", "acme/web", "4.0 GiB of memory over its capacity of 8.0 GiB") {
		t.Errorf("extra: got %q", w)
	}
	if w := why["small"]; w != ownerReason("org", "acme", "1 replica over its capacity of 3 replicas") {
		t.Errorf("small: got %q", w)
	}
	checkFixpoint(t, nodes, []*catalog.Model{big, small, extra, free}, next, nil, nil, t0, ow)

	// Node a drains: big's replica there is replaced on b, though the
	// team is full while both run.
	cur := map[string][]string{"big": {"a", "b"}}
	nodes[0] = drainingNode(nodes[0])
	next, why = Plan(nodes, []*catalog.Model{big}, cur, nil, nil, t0, ow)
	if got := perNode(next["big"]); got["b"] != 2 || why["big"] != "" {
		t.Errorf("drain: got %v (%q), want both replicas on b", next["big"], why["big"])
	}
}

// BenchmarkOwnerCheck is the capacity check a placement makes: 500
// replicas of 100 models on the node, owners three levels deep, each
// level with a capacity.
func BenchmarkOwnerCheck(b *testing.B) {
	var orgs []*tenancy.Org
	for o := range 5 {
		org := &tenancy.Org{Name: fmt.Sprintf("o%d", o), Capacity: &tenancy.Capacity{Memory: 1 << 50, Replicas: 1000}}
		for t := range 4 {
			team := &tenancy.Team{Name: fmt.Sprintf("t%d", t), Capacity: &tenancy.Capacity{Cores: 1 << 20}}
			for p := range 5 {
				team.Projects = append(team.Projects, &tenancy.Project{Name: fmt.Sprintf("p%d", p), Capacity: &tenancy.Capacity{Replicas: 100}})
			}
			org.Teams = append(org.Teams, team)
		}
		orgs = append(orgs, org)
	}
	ow := NewOwnerTable(orgs)
	var places []*Placement
	for i := range 500 {
		m := &catalog.Model{Name: fmt.Sprintf("m%d", i%100), Owner: fmt.Sprintf("o%d/t%d/p%d", i%5, i%4, i%5), Resources: &catalog.Resources{Memory: 1 << 30, Cores: 1}}
		f := &testHolder{m: m}
		places = append(places, &Placement{holder: f, need: m.Needs()})
	}
	need := catalog.Resources{Memory: 1 << 30, Cores: 1}
	b.ResetTimer()
	for range b.N {
		if why := ownerCheck(ow, "o1/t1/p1", places, need); why != "" {
			b.Fatal(why)
		}
	}
}
