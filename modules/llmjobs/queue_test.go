package llmjobs

import (
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/fleet"
)

// queueOf makes a service whose model m has the given jobs queued (owner,
// priority), in that order, without dispatchers.
func queueOf(t *testing.T, jobs ...[2]string) *service {
	t.Helper()
	s, err := openService(t.TempDir(), zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Destruct() })
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, oj := range jobs {
		s.seq++
		j := &job{ID: fmt.Sprintf("j%d", i), Model: "m", State: stateQueued, Owner: oj[0], Priority: oj[1], seq: s.seq}
		s.jobs[j.ID] = j
		s.queues["m"] = append(s.queues["m"], j)
	}
	return s
}

var rep = &fleet.Replica{ID: "r"}

func order(s *service) []string {
	var out []string
	for j := s.next("m", rep); j != nil; j = s.next("m", rep) {
		out = append(out, j.ID)
	}
	return out
}

// Projects take turns; each project's jobs go in order; a higher
// priority goes first.
func TestQueueOrder(t *testing.T) {
	s := queueOf(t, [2]string{"a", "normal"}, [2]string{"a", "normal"}, [2]string{"a", "normal"},
		[2]string{"b", "normal"}, [2]string{"c", "normal"}, [2]string{"b", "normal"})
	if got, want := fmt.Sprint(order(s)), "[j0 j3 j4 j1 j5 j2]"; got != want {
		t.Errorf("turns: got %s, want %s", got, want)
	}
	s = queueOf(t, [2]string{"a", "low"}, [2]string{"b", "normal"}, [2]string{"a", "high"}, [2]string{"b", "high"})
	if got, want := fmt.Sprint(order(s)), "[j2 j3 j1 j0]"; got != want {
		t.Errorf("priorities: got %s, want %s", got, want)
	}
}

// With every project waiting, each gets its share of the runs.
func TestQueueFairShare(t *testing.T) {
	var jobs [][2]string
	for i := range 500 {
		owner := fmt.Sprintf("p%d", i%5)
		if i < 300 { // p0 floods the queue first
			owner = "p0"
		}
		jobs = append(jobs, [2]string{owner, "normal"})
	}
	s := queueOf(t, jobs...)
	counts := map[string]int{}
	for range 100 { // the first 100 runs while all wait
		counts[s.next("m", rep).Owner]++
	}
	for _, p := range []string{"p0", "p1", "p2", "p3", "p4"} {
		if counts[p] < 18 || counts[p] > 22 {
			t.Errorf("%s ran %d of the first 100 jobs; each of 5 projects should run about 20: %v", p, counts[p], counts)
		}
	}
	s.mu.Lock()
	q := s.queues["m"]
	first, last := s.viewLocked(q[0]).QueuePosition, s.viewLocked(q[len(q)-1]).QueuePosition
	s.mu.Unlock()
	if first == nil || last == nil || *last <= *first || *last >= len(q) {
		t.Errorf("queue positions of the first and last jobs waiting: %v %v of %d", first, last, len(q))
	}
}
