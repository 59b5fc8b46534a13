package place

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

const gib = int64(1) << 30

// t0 is the planner's clock in these tests.
var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func cnode(name string, memGiB int64, cores, gpus int) Node {
	return Node{Name: name, Capacity: catalog.Resources{Memory: memGiB * gib, Cores: cores, GPUs: gpus}}
}

func drainingNode(n Node) Node { n.Draining = true; return n }

// pmodel is a catalog model with scaling min..max and what one replica needs.
func pmodel(name string, lo, hi int, memGiB int64, cores int) *catalog.Model {
	return &catalog.Model{Name: name, Engine: "sim", Source: "hf://acme/" + name,
		Scaling:   &catalog.Scaling{Min: intp(lo), Max: intp(hi), IdleTimeout: caddy.Duration(10 * time.Minute)},
		Resources: &catalog.Resources{Memory: memGiB * gib, Cores: cores}}
}

// perNode counts entries by node.
func perNode(entries []string) map[string]int {
	c := map[string]int{}
	for _, n := range entries {
		c[n]++
	}
	return c
}

// sorted returns entries sorted, for comparing sets of placements.
func sorted(entries []string) []string {
	s := slices.Clone(entries)
	slices.Sort(s)
	return s
}

// checkRoom fails when the plan puts more on a live node than it has.
func checkRoom(t *testing.T, nodes []Node, models []*catalog.Model, next map[string][]string) {
	t.Helper()
	used := map[string]catalog.Resources{}
	for _, m := range models {
		for _, n := range next[m.Name] {
			used[n] = used[n].Add(m.Needs(), 1)
		}
	}
	for _, n := range nodes {
		if !used[n.Name].Fits(n.Capacity) {
			t.Errorf("node %q holds %v, more than its %v", n.Name, used[n.Name], n.Capacity)
		}
	}
}

// checkFixpoint fails when planning again from the plan changes it.
func checkFixpoint(t *testing.T, nodes []Node, models []*catalog.Model, next map[string][]string,
	load map[string]Load, stopped map[string]bool, now time.Time, owners ...*OwnerTable) {
	t.Helper()
	var ow *OwnerTable
	if len(owners) > 0 {
		ow = owners[0]
	}
	again, _ := Plan(nodes, models, next, load, stopped, now, ow)
	if d := cmp.Diff(next, again, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("planning again changed the plan (-first +second):\n%s", d)
	}
}

func TestPlanPlaces(t *testing.T) {
	three := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), cnode("c", 64, 16, 0)}
	for _, tc := range []struct {
		name   string
		nodes  []Node
		models []*catalog.Model
		want   map[string]map[string]int // model → node → entries
		why    map[string]string
	}{{
		name:   "min 3 lands on three nodes",
		nodes:  three,
		models: []*catalog.Model{pmodel("llama-3.1-8b", 3, 3, 16, 4)},
		want:   map[string]map[string]int{"llama-3.1-8b": {"a": 1, "b": 1, "c": 1}},
	}, {
		name:   "five replicas spread 2/2/1",
		nodes:  three,
		models: []*catalog.Model{pmodel("llama-3.1-8b", 5, 5, 8, 2)},
		want:   map[string]map[string]int{"llama-3.1-8b": {"a": 2, "b": 2, "c": 1}},
	}, {
		name:   "a node too small is skipped",
		nodes:  []Node{cnode("a", 64, 16, 0), cnode("small", 8, 16, 0), cnode("c", 64, 16, 0)},
		models: []*catalog.Model{pmodel("llama-3.1-8b", 3, 3, 16, 4)},
		want:   map[string]map[string]int{"llama-3.1-8b": {"a": 2, "c": 1}},
	}, {
		name:   "a second replica shares a node only when no other has room",
		nodes:  []Node{cnode("a", 64, 16, 0), cnode("b", 16, 2, 0), cnode("c", 16, 16, 0)},
		models: []*catalog.Model{pmodel("qwen2.5-32b", 2, 2, 32, 8)},
		want:   map[string]map[string]int{"qwen2.5-32b": {"a": 2}},
	}, {
		name:   "nothing fits",
		nodes:  []Node{cnode("a", 16, 8, 0), cnode("b", 32, 4, 0)},
		models: []*catalog.Model{pmodel("big", 1, 1, 40, 8)},
		want:   map[string]map[string]int{"big": {}},
		why:    map[string]string{"big": `no node has room for "big" (a replica needs 40 GiB memory, 8 cores); the most free is node "b" with 32 GiB memory, 4 cores free`},
	}, {
		name:   "part fits",
		nodes:  []Node{cnode("a", 48, 8, 0), cnode("b", 32, 4, 0)},
		models: []*catalog.Model{pmodel("big", 2, 2, 40, 8)},
		want:   map[string]map[string]int{"big": {"a": 1}},
		why:    map[string]string{"big": `"big" has 1 of 2 replicas placed: no node has room for another (a replica needs 40 GiB memory, 8 cores); the most free is node "b" with 32 GiB memory, 4 cores free`},
	}, {
		name:   "models fill nodes together",
		nodes:  []Node{cnode("a", 32, 8, 0), cnode("b", 32, 8, 0)},
		models: []*catalog.Model{pmodel("m1", 2, 2, 16, 4), pmodel("m2", 2, 2, 16, 4), pmodel("m3", 1, 1, 16, 4)},
		want:   map[string]map[string]int{"m1": {"a": 1, "b": 1}, "m2": {"a": 1, "b": 1}, "m3": {}},
		why:    map[string]string{"m3": `no node has room for "m3" (a replica needs 16 GiB memory, 4 cores); the most free is node "a" with 0 B memory, 0 cores free`},
	}, {
		name:  "GPU models go where the GPUs are",
		nodes: []Node{cnode("cpu-1", 256, 64, 0), cnode("gpu-1", 256, 64, 2), cnode("gpu-2", 256, 64, 2)},
		models: []*catalog.Model{func() *catalog.Model {
			m := pmodel("llama-3.1-70b", 3, 3, 80, 8)
			m.Resources.GPUs = 1
			return m
		}()},
		want: map[string]map[string]int{"llama-3.1-70b": {"gpu-1": 2, "gpu-2": 1}},
	}, {
		name:   "models that need no GPU leave GPU nodes free",
		nodes:  []Node{cnode("gpu-1", 512, 64, 8), cnode("cpu-1", 64, 16, 0), cnode("cpu-2", 64, 16, 0)},
		models: []*catalog.Model{pmodel("llama-3.1-8b", 2, 2, 16, 4), pmodel("phi-3-mini", 4, 4, 4, 1)},
		want: map[string]map[string]int{"llama-3.1-8b": {"cpu-1": 1, "cpu-2": 1},
			"phi-3-mini": {"cpu-1": 2, "cpu-2": 1, "gpu-1": 1}},
	}, {
		name:   "a node listed twice counts once",
		nodes:  []Node{cnode("a", 32, 8, 0), cnode("a", 32, 8, 0), cnode("b", 8, 8, 0)},
		models: []*catalog.Model{pmodel("llama-3.1-8b", 3, 3, 16, 4)},
		want:   map[string]map[string]int{"llama-3.1-8b": {"a": 2}},
		why:    map[string]string{"llama-3.1-8b": `"llama-3.1-8b" has 2 of 3 replicas placed: no node has room for another (a replica needs 16 GiB memory, 4 cores); the most free is node "b" with 8.0 GiB memory, 8 cores free`},
	}, {
		name: "every node draining",
		nodes: []Node{drainingNode(cnode("a", 64, 16, 0)), drainingNode(cnode("b", 64, 16, 0)),
			drainingNode(cnode("c", 64, 16, 0)), drainingNode(cnode("d", 64, 16, 0)), drainingNode(cnode("e", 64, 16, 0))},
		models: []*catalog.Model{pmodel("llama-3.1-8b", 1, 1, 16, 4)},
		want:   map[string]map[string]int{"llama-3.1-8b": {}},
		why:    map[string]string{"llama-3.1-8b": `no node can run "llama-3.1-8b"; node "a" is draining; node "b" is draining; node "c" is draining; and 2 more nodes draining or failing`},
	}, {
		name:   "no node up",
		models: []*catalog.Model{pmodel("llama-3.1-8b", 1, 1, 16, 4)},
		want:   map[string]map[string]int{"llama-3.1-8b": {}},
		why:    map[string]string{"llama-3.1-8b": `no node is up to run "llama-3.1-8b"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			next, why := Plan(tc.nodes, tc.models, nil, nil, nil, t0, nil)
			got := map[string]map[string]int{}
			for m, entries := range next {
				got[m] = perNode(entries)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("placements (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.why, why, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("why (-want +got):\n%s", d)
			}
			checkRoom(t, tc.nodes, tc.models, next)
			checkFixpoint(t, tc.nodes, tc.models, next, nil, nil, t0)
		})
	}
}

func TestPlanKeepsCurrentEntries(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), cnode("c", 64, 16, 0), cnode("d", 64, 16, 0)}
	models := []*catalog.Model{pmodel("llama-3.1-8b", 2, 2, 16, 4), pmodel("phi-3-mini", 1, 1, 4, 1)}
	// Placed elsewhere than a fresh plan would, and out of name order:
	// both stay exactly as they are.
	cur := map[string][]string{"llama-3.1-8b": {"d", "c"}, "phi-3-mini": {"c"}}
	next, why := Plan(nodes, models, cur, nil, nil, t0, nil)
	if d := cmp.Diff(cur, next); d != "" || len(why) > 0 {
		t.Fatalf("plan moved replicas that fit (-cur +next):\n%s\nwhy: %v", d, why)
	}
	// A model removed from the catalog loses its entries; one whose
	// replicas no longer fit its node moves.
	cur = map[string][]string{"llama-3.1-8b": {"d", "c"}, "phi-3-mini": {"c"}, "gone": {"a"}}
	nodes[3].Capacity.Memory = 8 * gib
	next, _ = Plan(nodes, models, cur, nil, nil, t0, nil)
	want := map[string][]string{"llama-3.1-8b": {"c", "a"}, "phi-3-mini": {"c"}}
	if d := cmp.Diff(want, next); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestPlanDeadNode(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), cnode("d", 64, 16, 0)}
	models := []*catalog.Model{pmodel("llama-3.1-8b", 3, 3, 16, 4), pmodel("mistral-7b", 1, 4, 8, 2)}
	// Node c died: its entries go elsewhere, and a model scaled above its
	// min keeps its count.
	cur := map[string][]string{"llama-3.1-8b": {"a", "b", "c"}, "mistral-7b": {"c", "c", "a"}}
	next, why := Plan(nodes, models, cur, nil, nil, t0, nil)
	want := map[string][]string{"llama-3.1-8b": {"a", "b", "d"}, "mistral-7b": {"a", "b", "d"}}
	if d := cmp.Diff(want, next); d != "" || len(why) > 0 {
		t.Fatalf("(-want +got):\n%s\nwhy: %v", d, why)
	}
	checkFixpoint(t, nodes, models, next, nil, nil, t0)
}

func TestPlanDrain(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), drainingNode(cnode("c", 64, 16, 0)), cnode("d", 64, 16, 0)}
	models := []*catalog.Model{pmodel("llama-3.1-8b", 3, 3, 16, 4)}
	cur := map[string][]string{"llama-3.1-8b": {"a", "b", "c"}}
	ready := func(r map[string]int) map[string]Load {
		return map[string]Load{"llama-3.1-8b": {Ready: r, LastUsed: t0}}
	}
	for _, round := range []struct {
		name  string
		ready map[string]int
		want  []string
	}{
		{"replacement placed, drained entry kept", map[string]int{"a": 1, "b": 1, "c": 1}, []string{"a", "b", "c", "d"}},
		{"replacement starting: drained entry kept", map[string]int{"a": 1, "b": 1, "c": 1}, []string{"a", "b", "c", "d"}},
		{"replacement ready: drained entry dropped", map[string]int{"a": 1, "b": 1, "c": 1, "d": 1}, []string{"a", "b", "d"}},
		{"stable after the drain", map[string]int{"a": 1, "b": 1, "d": 1}, []string{"a", "b", "d"}},
	} {
		next, why := Plan(nodes, models, cur, ready(round.ready), nil, t0, nil)
		if got := next["llama-3.1-8b"]; !slices.Equal(got, round.want) || len(why) > 0 {
			t.Fatalf("%s: got %v, want %v (why: %v)", round.name, got, round.want, why)
		}
		cur = next
	}

	// A model started on demand (min 0) whose one replica is on the
	// draining node keeps a replica: it moves.
	od := []*catalog.Model{pmodel("phi-3-mini", 0, 2, 4, 1)}
	cur = map[string][]string{"phi-3-mini": {"c"}}
	for _, round := range []struct {
		ready map[string]int
		want  []string
	}{
		{map[string]int{"c": 1}, []string{"c", "a"}},
		{map[string]int{"c": 1}, []string{"c", "a"}},
		{map[string]int{"c": 1, "a": 1}, []string{"a"}},
	} {
		load := map[string]Load{"phi-3-mini": {Ready: round.ready, LastUsed: t0}}
		next, _ := Plan(nodes, od, cur, load, nil, t0, nil)
		if got := next["phi-3-mini"]; !slices.Equal(got, round.want) {
			t.Fatalf("on demand, ready %v: got %v, want %v", round.ready, got, round.want)
		}
		cur = next
	}

	// Every node draining (ctl cluster stop drained the last one): the
	// replicas left stop, there being nowhere to move them.
	all := []Node{drainingNode(cnode("a", 64, 16, 0)), drainingNode(cnode("d", 64, 16, 0))}
	cur = map[string][]string{"llama-3.1-8b": {"a", "a", "d"}}
	next, _ := Plan(all, models, cur, ready(map[string]int{"a": 2, "d": 1}), nil, t0, nil)
	if got := next["llama-3.1-8b"]; len(got) != 0 {
		t.Fatalf("every node draining: replicas kept on %v", got)
	}

	// Nothing new goes to a draining node, even when it is the only one
	// with room; the why names it.
	nodes = []Node{cnode("a", 8, 16, 0), drainingNode(cnode("c", 64, 16, 0))}
	next, why := Plan(nodes, models, nil, nil, nil, t0, nil)
	wantWhy := `no node has room for "llama-3.1-8b" (a replica needs 16 GiB memory, 4 cores); the most free is node "a" with 8.0 GiB memory, 16 cores free; node "c" is draining`
	if len(next["llama-3.1-8b"]) != 0 || why["llama-3.1-8b"] != wantWhy {
		t.Fatalf("got %v, why %q; want none, why %q", next, why["llama-3.1-8b"], wantWhy)
	}
}

func TestPlanFailingNode(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), cnode("c", 64, 16, 0)}
	nodes[0].Failing = map[string]string{"qwen2-vl": "engine vllm is not installed"}
	nodes[1].Failing = map[string]string{"qwen2-vl": "its last start failed: out of memory"}
	models := []*catalog.Model{pmodel("qwen2-vl", 2, 2, 16, 4)}
	// The entry on a, never ready there, moves; c takes both.
	next, why := Plan(nodes, models, map[string][]string{"qwen2-vl": {"a", "c"}}, nil, nil, t0, nil)
	if got := next["qwen2-vl"]; !slices.Equal(got, []string{"c", "c"}) || len(why) > 0 {
		t.Fatalf("got %v (why %v), want [c c]", got, why)
	}
	// A replica already ready on a failing node stays.
	load := map[string]Load{"qwen2-vl": {Ready: map[string]int{"a": 1}}}
	next, _ = Plan(nodes, models, map[string][]string{"qwen2-vl": {"a", "c"}}, load, nil, t0, nil)
	if got := next["qwen2-vl"]; !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("got %v, want [a c]", got)
	}
	nodes[2].Failing = map[string]string{"qwen2-vl": "engine vllm is not installed"}
	_, why = Plan(nodes, models, nil, nil, nil, t0, nil)
	want := `no node can run "qwen2-vl"; node "a" cannot start it (engine vllm is not installed); node "b" cannot start it (its last start failed: out of memory); node "c" cannot start it (engine vllm is not installed)`
	if why["qwen2-vl"] != want {
		t.Fatalf("why:\n got %q\nwant %q", why["qwen2-vl"], want)
	}
}

func TestPlanStopped(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), drainingNode(cnode("b", 64, 16, 0))}
	models := []*catalog.Model{pmodel("llama-3.1-8b", 2, 2, 16, 4)}
	cur := map[string][]string{"llama-3.1-8b": {"a", "b"}}
	load := map[string]Load{"llama-3.1-8b": {Busy: true}}
	next, why := Plan(nodes, models, cur, load, map[string]bool{"llama-3.1-8b": true}, t0, nil)
	if got, ok := next["llama-3.1-8b"]; !ok || len(got) != 0 || len(why) > 0 {
		t.Fatalf("stopped model: got %v (present %v), why %v; want an empty entry", got, ok, why)
	}
}

func TestPlanScaling(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), cnode("c", 64, 16, 0)}
	long := t0.Add(-11 * time.Minute)
	all := func(entries ...string) map[string]int { return perNode(entries) }
	for _, tc := range []struct {
		name  string
		min   int
		max   int
		cur   []string
		load  Load
		count int
	}{
		{"busy, all ready: one more", 1, 4, []string{"a"}, Load{Busy: true, LastUsed: t0, Ready: all("a")}, 2},
		{"busy, one still starting: none more", 1, 4, []string{"a", "b"}, Load{Busy: true, LastUsed: t0, Ready: all("a")}, 2},
		{"busy, at max", 1, 2, []string{"a", "b"}, Load{Busy: true, LastUsed: t0, Ready: all("a", "b")}, 2},
		{"ready on a node the plan does not count", 1, 4, []string{"a", "b"}, Load{Busy: true, LastUsed: t0, Ready: all("a", "a", "c")}, 2},
		{"idle: one fewer", 1, 4, []string{"a", "b", "c"}, Load{LastUsed: long, Ready: all("a", "b", "c")}, 2},
		{"idle at min", 1, 4, []string{"a"}, Load{LastUsed: long, Ready: all("a")}, 1},
		{"used lately", 1, 4, []string{"a", "b"}, Load{LastUsed: t0.Add(-9 * time.Minute)}, 2},
		{"never reported used: kept", 1, 4, []string{"a", "b"}, Load{}, 2},
		{"busy after the idle timeout: kept", 1, 4, []string{"a", "b"}, Load{Busy: true, LastUsed: long}, 2},
		{"on demand, idle: none", 0, 1, nil, Load{}, 0},
		{"on demand, busy: started", 0, 1, nil, Load{Busy: true, LastUsed: t0}, 1},
		{"on demand, idle timeout: stopped", 0, 1, []string{"b"}, Load{LastUsed: long, Ready: all("b")}, 0},
		{"below min: raised", 3, 4, []string{"a"}, Load{Busy: true, LastUsed: t0, Ready: all("a")}, 3},
		{"above max: lowered", 1, 2, []string{"a", "b", "c"}, Load{LastUsed: t0}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			models := []*catalog.Model{pmodel("m", tc.min, tc.max, 16, 4)}
			next, _ := Plan(nodes, models, map[string][]string{"m": tc.cur}, map[string]Load{"m": tc.load}, nil, t0, nil)
			if got := len(next["m"]); got != tc.count {
				t.Fatalf("got %d replicas (%v), want %d", got, next["m"], tc.count)
			}
		})
	}

	// Idle replicas go one a round, from the node with most of them,
	// down to min.
	models := []*catalog.Model{pmodel("m", 1, 5, 16, 4)}
	cur := map[string][]string{"m": {"a", "b", "c", "a"}}
	idle := map[string]Load{"m": {LastUsed: long, Ready: all("a", "a", "b", "c")}}
	var rounds [][]string
	for range 4 {
		next, _ := Plan(nodes, models, cur, idle, nil, t0, nil)
		rounds = append(rounds, next["m"])
		cur = next
	}
	want := [][]string{{"a", "b", "c"}, {"a", "b"}, {"a"}, {"a"}}
	if d := cmp.Diff(want, rounds); d != "" {
		t.Fatalf("idle rounds (-want +got):\n%s", d)
	}
}

func TestPlanPrefersCachedWeights(t *testing.T) {
	nodes := []Node{cnode("a", 128, 16, 0), cnode("b", 64, 16, 0), cnode("c", 64, 16, 0), cnode("d", 64, 16, 0)}
	nodes[2].Cached = map[string]bool{"hf://acme/llama-3.1-8b": true}
	nodes[3].Cached = map[string]bool{"hf://acme/llama-3.1-8b": true}
	models := []*catalog.Model{pmodel("llama-3.1-8b", 3, 3, 16, 4)}
	next, _ := Plan(nodes, models, nil, nil, nil, t0, nil)
	// The two caching nodes first; then the most free memory.
	if got := next["llama-3.1-8b"]; !slices.Equal(got, []string{"c", "d", "a"}) {
		t.Fatalf("got %v, want [c d a]", got)
	}
}

func TestPlanClasses(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0)}
	crit := pmodel("support-bot", 2, 2, 48, 8)
	crit.Class = catalog.ClassCritical
	std := pmodel("llama-3.1-8b", 1, 1, 16, 4)
	opp := pmodel("batch-summariser", 2, 2, 32, 4)
	opp.Class = catalog.ClassOpportunistic
	models := []*catalog.Model{opp, std, crit}
	// The opportunistic model holds both nodes; the critical one takes
	// its place, and the standard one still fits beside it.
	cur := map[string][]string{"batch-summariser": {"a", "b"}}
	next, why := Plan(nodes, models, cur, nil, nil, t0, nil)
	want := map[string][]string{"support-bot": {"a", "b"}, "llama-3.1-8b": {"a"}, "batch-summariser": nil}
	if d := cmp.Diff(want, next, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	wantWhy := map[string]string{"batch-summariser": `no node has room for "batch-summariser" (a replica needs 32 GiB memory, 4 cores); the most free is node "b" with 16 GiB memory, 8 cores free`}
	if d := cmp.Diff(wantWhy, why); d != "" {
		t.Fatalf("why (-want +got):\n%s", d)
	}
	checkRoom(t, nodes, models, next)
	checkFixpoint(t, nodes, models, next, nil, nil, t0)

	// Lower classes never displace higher ones, and a class displaces
	// only what it needs: one of two opportunistic entries on a node.
	nodes = []Node{cnode("a", 64, 16, 0)}
	small := pmodel("embed", 2, 2, 24, 2)
	small.Class = catalog.ClassOpportunistic
	models = []*catalog.Model{small, pmodel("llama-3.1-8b", 1, 1, 32, 4)}
	next, _ = Plan(nodes, models, map[string][]string{"embed": {"a", "a"}}, nil, nil, t0, nil)
	if got := next["embed"]; !slices.Equal(got, []string{"a"}) {
		t.Fatalf("embed: got %v, want [a]", got)
	}
	if got := next["llama-3.1-8b"]; !slices.Equal(got, []string{"a"}) {
		t.Fatalf("llama-3.1-8b: got %v, want [a]", got)
	}

	// An entry that holds none of what is missing (here, a GPU) stays
	// where it is.
	nodes = []Node{cnode("gpu-1", 64, 16, 1), cnode("cpu-1", 64, 16, 0)}
	gpu := pmodel("llama-3.1-70b", 1, 1, 16, 4)
	gpu.Resources.GPUs = 1
	gpu.Class = catalog.ClassCritical
	cpu, holder := pmodel("zephyr-7b", 2, 2, 4, 1), pmodel("whisper", 1, 1, 8, 2)
	cpu.Class, holder.Class = catalog.ClassOpportunistic, catalog.ClassOpportunistic
	holder.Resources.GPUs = 1
	models = []*catalog.Model{gpu, cpu, holder}
	next, _ = Plan(nodes, models, map[string][]string{"zephyr-7b": {"gpu-1", "cpu-1"}, "whisper": {"gpu-1"}}, nil, nil, t0, nil)
	want = map[string][]string{"llama-3.1-70b": {"gpu-1"}, "zephyr-7b": {"gpu-1", "cpu-1"}, "whisper": nil}
	if d := cmp.Diff(want, next, cmpopts.EquateEmpty()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

// bigCluster is 40 CPU nodes and 10 GPU nodes, and 100 models with min 5
// each: 70 small, 20 medium, 10 critical GPU models.
func bigCluster() ([]Node, []*catalog.Model) {
	var nodes []Node
	for i := range 50 {
		if i%5 == 4 {
			nodes = append(nodes, cnode(fmt.Sprintf("gpu-%02d", i), 512, 64, 8))
		} else {
			nodes = append(nodes, cnode(fmt.Sprintf("cpu-%02d", i), 128, 32, 0))
		}
	}
	var models []*catalog.Model
	for i := range 100 {
		var m *catalog.Model
		switch {
		case i < 70:
			m = pmodel(fmt.Sprintf("small-%02d", i), 5, 8, 4, 2)
		case i < 90:
			m = pmodel(fmt.Sprintf("medium-%02d", i), 5, 8, 16, 4)
		default:
			m = pmodel(fmt.Sprintf("gpu-%02d", i), 5, 8, 64, 8)
			m.Resources.GPUs = 1
			m.Class = catalog.ClassCritical
		}
		if i%3 == 0 {
			nodes[i%50].Cached = map[string]bool{m.Source: true}
		}
		models = append(models, m)
	}
	return nodes, models
}

func TestPlan50Nodes500Replicas(t *testing.T) {
	nodes, models := bigCluster()
	next, why := Plan(nodes, models, nil, nil, nil, t0, nil)
	if len(why) > 0 {
		t.Fatalf("not all placed: %v", why)
	}
	total := 0
	for _, m := range models {
		entries := next[m.Name]
		total += len(entries)
		if d := len(perNode(entries)); len(entries) != 5 || d != 5 {
			t.Errorf("%s: %d replicas on %d nodes, want 5 on 5: %v", m.Name, len(entries), d, entries)
		}
	}
	if total != 500 {
		t.Fatalf("placed %d replicas, want 500", total)
	}
	checkRoom(t, nodes, models, next)
	checkFixpoint(t, nodes, models, next, nil, nil, t0)

	// A GPU node dies: its replicas land on the other GPU nodes.
	lost := nodes[4].Name
	rest := slices.Delete(slices.Clone(nodes), 4, 5)
	after, why := Plan(rest, models, next, nil, nil, t0, nil)
	if len(why) > 0 {
		t.Fatalf("not all re-placed: %v", why)
	}
	moved := 0
	for _, m := range models {
		if len(after[m.Name]) != 5 || slices.Contains(after[m.Name], lost) {
			t.Errorf("%s: %v after %s died", m.Name, after[m.Name], lost)
		}
		for _, n := range after[m.Name] {
			if !slices.Contains(next[m.Name], n) {
				moved++
			}
		}
	}
	if had := len(slices.DeleteFunc(slices.Concat(slices.Collect(maps.Values(next))...), func(n string) bool { return n != lost })); moved != had {
		t.Errorf("%d replicas moved, want the %d the dead node had", moved, had)
	}
	checkRoom(t, rest, models, after)
}

// crowdedCluster is 50 nodes full of 100 opportunistic models × 5, the
// plan that holds them, and 50 critical models × 5 that need half
// their room.
func crowdedCluster() ([]Node, []*catalog.Model, map[string][]string) {
	var nodes []Node
	var models []*catalog.Model
	for i := range 50 {
		nodes = append(nodes, cnode(fmt.Sprintf("n-%02d", i), 128, 64, 0))
	}
	for i := range 100 {
		m := pmodel(fmt.Sprintf("batch-%02d", i), 5, 5, 12, 1)
		m.Class = catalog.ClassOpportunistic
		models = append(models, m)
	}
	full, _ := Plan(nodes, models, nil, nil, nil, t0, nil)
	for i := range 50 {
		m := pmodel(fmt.Sprintf("support-%02d", i), 5, 5, 12, 1)
		m.Class = catalog.ClassCritical
		models = append(models, m)
	}
	return nodes, models, full
}

func TestPlanCrowdedCluster(t *testing.T) {
	nodes, models, full := crowdedCluster()
	next, why := Plan(nodes, models, full, nil, nil, t0, nil)
	kept := 0
	for _, m := range models {
		entries := next[m.Name]
		if m.Class == catalog.ClassCritical {
			if d := len(perNode(entries)); len(entries) != 5 || d != 5 {
				t.Errorf("%s: %d replicas on %d nodes, want 5 on 5: %v", m.Name, len(entries), d, entries)
			}
			continue
		}
		kept += len(entries)
		if len(entries) < 5 && why[m.Name] == "" {
			t.Errorf("%s: %d replicas and no why", m.Name, len(entries))
		}
	}
	// 50 nodes hold 10 replicas each: 250 critical, 250 of the 500 batch.
	if kept != 250 {
		t.Errorf("%d batch replicas kept, want 250", kept)
	}
	checkRoom(t, nodes, models, next)
	checkFixpoint(t, nodes, models, next, nil, nil, t0)
}

// BenchmarkPlan50Nodes500Replicas plans 100 models × min 5 over 50 nodes
// from an empty plan (a cold start), and again from that plan (a round
// where nothing changes); then 50 critical models × 5 arrive in a
// cluster full of opportunistic replicas and take half their places (the
// planner's costliest case).
func BenchmarkPlan50Nodes500Replicas(b *testing.B) {
	nodes, models := bigCluster()
	b.Run("cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Plan(nodes, models, nil, nil, nil, t0, nil)
		}
	})
	cur, _ := Plan(nodes, models, nil, nil, nil, t0, nil)
	b.Run("steady", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Plan(nodes, models, cur, nil, nil, t0, nil)
		}
	})
	nodes, models, full := crowdedCluster()
	b.Run("displace", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Plan(nodes, models, full, nil, nil, t0, nil)
		}
	})
}

// TestPlanFixpoint plans random clusters twice: the second round, with
// the same nodes and load, keeps the first round's plan, and neither
// puts more on a node than it has.
func TestPlanFixpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	placed := 0
	defer func() { t.Logf("%d cases placed everything in one round", placed) }()
	for c := range 2000 {
		var nodes []Node
		var names []string
		for i := range 1 + rng.IntN(8) {
			n := cnode(fmt.Sprintf("n%d", i), int64(16+rng.IntN(8)*16), 4+rng.IntN(4)*4, rng.IntN(3)/2*4)
			n.Draining = rng.IntN(6) == 0
			if rng.IntN(6) == 0 {
				n.Failing = map[string]string{fmt.Sprintf("m%d", rng.IntN(6)): "engine missing"}
			}
			nodes = append(nodes, n)
			names = append(names, n.Name)
		}
		names = append(names, "dead")
		var models []*catalog.Model
		cur := map[string][]string{}
		load := map[string]Load{}
		for i := range 1 + rng.IntN(6) {
			lo := rng.IntN(4)
			m := pmodel(fmt.Sprintf("m%d", i), lo, lo+rng.IntN(3), int64(4+rng.IntN(4)*8), 1+rng.IntN(4))
			m.Class = []string{catalog.ClassCritical, catalog.ClassStandard, catalog.ClassOpportunistic}[rng.IntN(3)]
			if rng.IntN(4) == 0 {
				m.Resources.GPUs = 1
			}
			models = append(models, m)
			ld := Load{Ready: map[string]int{}}
			for range rng.IntN(5) {
				n := names[rng.IntN(len(names))]
				cur[m.Name] = append(cur[m.Name], n)
				ld.Ready[n] += rng.IntN(2)
			}
			load[m.Name] = ld
		}
		first, why := Plan(nodes, models, cur, load, nil, t0, nil)
		second, _ := Plan(nodes, models, first, load, nil, t0, nil)
		if len(why) == 0 {
			placed++
		}
		t.Run(fmt.Sprint(c), func(t *testing.T) {
			checkRoom(t, nodes, models, first)
			// Spreading moves one replica of a model a round (once its
			// replicas are ready), so a plan settles within a few rounds.
			settled := second
			for range 8 {
				settled, _ = Plan(nodes, models, settled, load, nil, t0, nil)
			}
			checkRoom(t, nodes, models, settled)
			checkFixpoint(t, nodes, models, settled, load, nil, t0)
			if t.Failed() {
				t.Logf("nodes %+v\ncur %v\nload %v", nodes, cur, load)
			}
		})
	}
}

// A model whose replicas all ran on the first node spreads over the
// nodes that join, one replica a round, each move once all are ready.
func TestPlanSpreadsToNodesThatJoin(t *testing.T) {
	nodes := []Node{cnode("a", 64, 16, 0), cnode("b", 64, 16, 0), cnode("c", 64, 16, 0)}
	models := []*catalog.Model{pmodel("chat", 3, 3, 8, 2)}
	cur := map[string][]string{"chat": {"a", "a", "a"}}
	ready := func(p map[string][]string) map[string]Load {
		ld := Load{Ready: map[string]int{}}
		for _, n := range p["chat"] {
			ld.Ready[n]++
		}
		return map[string]Load{"chat": ld}
	}
	// Not all ready: nothing moves.
	next, _ := Plan(nodes, models, cur, map[string]Load{"chat": {Ready: map[string]int{"a": 2}}}, nil, t0, nil)
	if d := cmp.Diff(cur, next); d != "" {
		t.Fatalf("moved while a replica was starting:\n%s", d)
	}
	next, _ = Plan(nodes, models, cur, ready(cur), nil, t0, nil)
	if got := perNode(next["chat"]); got["a"] != 2 || got["b"]+got["c"] != 1 {
		t.Fatalf("first round: %v; want one replica moved off a", next["chat"])
	}
	// The moved replica is not ready yet: the next round waits.
	again, _ := Plan(nodes, models, next, ready(cur), nil, t0, nil)
	if d := cmp.Diff(next, again); d != "" {
		t.Fatalf("moved a second replica before the first was ready:\n%s", d)
	}
	final, _ := Plan(nodes, models, next, ready(next), nil, t0, nil)
	if got := perNode(final["chat"]); got["a"] != 1 || got["b"] != 1 || got["c"] != 1 {
		t.Fatalf("second round: %v; want one replica on each node", final["chat"])
	}
	checkFixpoint(t, nodes, models, final, ready(final), nil, t0)
}
func intp(n int) *int { return &n }
