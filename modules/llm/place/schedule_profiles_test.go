package place

import (
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// A cluster of a GPU node and a CPU node: the model's replica goes to
// its GPU profile while the GPU is free, to its CPU profile on the CPU
// node while a critical model holds the GPU, and back to the GPU node
// once that model stops and the CPU replica is ready.
func TestPlanProfiles(t *testing.T) {
	nodes := []Node{cnode("g1", 64, 16, 1), cnode("c1", 64, 16, 0)}
	hog := &catalog.Model{Name: "hog", Engine: "sim", Class: catalog.ClassCritical, Resources: &catalog.Resources{GPUs: 1}}
	q := profiled("q", "", "", true)
	q.Scaling = &catalog.Scaling{Min: intp(1), Max: intp(1)}
	models := []*catalog.Model{hog, q}

	next, why, profs := PlanProfiles(nodes, models, nil, nil, nil, t0, nil)
	if !slices.Equal(next["hog"], []string{"g1"}) || !slices.Equal(next["q"], []string{"c1"}) || !slices.Equal(profs["q"], []string{"cpu"}) {
		t.Fatalf("with hog on the GPU: %v %v %v", next, why, profs)
	}
	if _, ok := profs["hog"]; ok {
		t.Errorf("a model without profiles has profiles in the plan: %v", profs)
	}
	checkFixpoint(t, nodes, models, next, nil, nil, t0)

	// hog stops: q moves to the GPU node once its replica is ready, not
	// before.
	stopped := map[string]bool{"hog": true}
	after, _, profs := PlanProfiles(nodes, models, next, nil, stopped, t0, nil)
	if !slices.Equal(after["q"], []string{"c1"}) || !slices.Equal(profs["q"], []string{"cpu"}) {
		t.Errorf("q moved before its replica was ready: %v %v", after["q"], profs["q"])
	}
	load := map[string]Load{"q": {Ready: map[string]int{"c1": 1}}}
	after, _, profs = PlanProfiles(nodes, models, next, load, stopped, t0, nil)
	if !slices.Equal(after["q"], []string{"g1"}) || !slices.Equal(profs["q"], []string{"gpu"}) {
		t.Errorf("q once ready on c1 with the GPU free: %v %v, want g1 on gpu", after["q"], profs["q"])
	}
	checkFixpoint(t, nodes, models, after, map[string]Load{"q": {Ready: map[string]int{"g1": 1}}}, stopped, t0)
}

// The CPU profile does not take a node whose GPUs are free; a model
// whose GPU profile fits nowhere waits, saying why, unless it prefers
// the CPU.
func TestPlanProfilesCPUWhileGPUsFree(t *testing.T) {
	nodes := []Node{cnode("g1", 16, 16, 2)}
	big := profiled("big", "", "", true)
	big.Profiles[0].Resources.Memory = 128 * gib
	next, why, _ := PlanProfiles(nodes, []*catalog.Model{big}, nil, nil, nil, t0, nil)
	if len(next["big"]) != 0 || !strings.Contains(why["big"], "has 2 GPUs free") || !strings.Contains(why["big"], "prefer cpu") {
		t.Errorf("big: %v, why %q", next["big"], why["big"])
	}
	big.Prefer = catalog.PreferCPU
	next, _, profs := PlanProfiles(nodes, []*catalog.Model{big}, nil, nil, nil, t0, nil)
	if !slices.Equal(next["big"], []string{"g1"}) || !slices.Equal(profs["big"], []string{"cpu"}) {
		t.Errorf("big with prefer cpu: %v %v", next["big"], profs["big"])
	}
	// With a CPU-only node beside it, the CPU profile goes there.
	nodes = append(nodes, cnode("c1", 64, 16, 0))
	big.Prefer = ""
	next, _, profs = PlanProfiles(nodes, []*catalog.Model{big}, nil, nil, nil, t0, nil)
	if !slices.Equal(next["big"], []string{"c1"}) || !slices.Equal(profs["big"], []string{"cpu"}) {
		t.Errorf("big with a CPU node: %v %v", next["big"], profs["big"])
	}
}

// Eviction frees the room of a victim's own profile: a standard model on
// its CPU profile gives its cores back, not its GPU profile's GPU.
func TestPlanProfilesEvictByEntryProfile(t *testing.T) {
	nodes := []Node{cnode("n1", 64, 4, 0)}
	low := profiled("low", catalog.ClassOpportunistic, "", true)
	low.Scaling = &catalog.Scaling{Min: intp(1), Max: intp(1)}
	crit := &catalog.Model{Name: "crit", Engine: "sim", Class: catalog.ClassCritical, Resources: &catalog.Resources{Cores: 4}}
	cur := map[string][]string{"low": {"n1"}}
	next, why, _ := PlanProfiles(nodes, []*catalog.Model{low, crit}, cur, nil, nil, t0, nil)
	if !slices.Equal(next["crit"], []string{"n1"}) || len(next["low"]) != 0 {
		t.Errorf("crit over low's CPU replica: %v %v", next, why)
	}
	checkRoom(t, nodes, []*catalog.Model{crit}, next)
}
