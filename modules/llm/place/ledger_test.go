package place

import (
	"slices"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

func TestFreeCPUs(t *testing.T) {
	all := []int{0, 1, 2, 3, 8, 9} // a CPU mask need not be contiguous
	l := &Ledger{}
	take := func(n int) []int {
		c := l.freeCPUsLocked(n, all)
		l.places = append(l.places, &Placement{CPUs: c})
		return c
	}
	for _, tc := range []struct {
		n    int
		want []int
	}{
		{2, []int{8, 9}}, // highest first: core 0 goes last
		{1, []int{3}},
		{4, nil}, // three left: the replica runs unpinned
		{3, []int{0, 1, 2}},
		{1, nil},
	} {
		if got := take(tc.n); !slices.Equal(got, tc.want) {
			t.Fatalf("%d cores: got %v, want %v", tc.n, got, tc.want)
		}
	}
	// An evicted placement's cores are free again for the replica that
	// displaced it.
	l.places[0].evicted = true
	if got := take(2); !slices.Equal(got, []int{8, 9}) {
		t.Fatalf("after eviction: got %v, want [8 9]", got)
	}
}

// testHolder stands for a fleet in the ledger's tests.
type testHolder struct {
	m       *catalog.Model
	evicted []string
}

func (h *testHolder) Model() *catalog.Model { return h.m }

func (h *testHolder) Evict(r Running, by string) { h.evicted = append(h.evicted, r.ReplicaID()) }

// testReplica stands for a replica in the ledger's tests.
type testReplica struct {
	id      string
	started time.Time
}

func (r *testReplica) ReplicaID() string    { return r.id }
func (r *testReplica) StartedAt() time.Time { return r.started }
func (r *testReplica) Inflight() int64      { return 0 }
