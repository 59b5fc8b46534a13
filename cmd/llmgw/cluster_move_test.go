package main

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterUndrainMakeBeforeBreak drains a node of a three-node cluster
// whose model runs min 3, then undrains it: the spread step moves a
// replica back, and the model must never run on fewer than three ready
// replicas meanwhile (the replica moved back was stopped before its
// replacement was ready, leaving two for a whole engine start).
func TestClusterUndrainMakeBeforeBreak(t *testing.T) {
	c := startCluster(t, 3, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")))
	n1, n2, n3 := c.nodes["n1"], c.nodes["n2"], c.nodes["n3"]
	all := []*gateway{n1, n2, n3}
	spread := func() bool {
		for _, g := range all {
			if !slices.Equal(g.readyOn("chat"), []string{"n1", "n2", "n3"}) {
				return false
			}
		}
		return true
	}
	waitFor(t, 30*time.Second, "chat on n1, n2 and n3", spread)
	if code, body := adminDo(t, n1, "POST", "/llm/nodes/n3/drain", ""); code != 200 {
		t.Fatalf("draining n3: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "chat to leave n3", func() bool {
		on := n1.readyOn("chat")
		return len(on) == 3 && !slices.Contains(on, "n3") && slices.Equal(n3.readyOn("chat"), on)
	})

	// Watch every node's view while n3 comes back.
	var fewest atomic.Int64
	fewest.Store(3)
	var low []string
	var mu sync.Mutex
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, g := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				on := g.readyOn("chat")
				if len(on) < 3 {
					mu.Lock()
					low = append(low, fmt.Sprint(on))
					mu.Unlock()
					if int64(len(on)) < fewest.Load() {
						fewest.Store(int64(len(on)))
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	if code, body := adminDo(t, n1, "POST", "/llm/nodes/n3/undrain", ""); code != 200 {
		t.Fatalf("undraining n3: %d %s", code, body)
	}
	waitFor(t, 30*time.Second, "chat back on n1, n2 and n3", spread)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	if f := fewest.Load(); f < 3 {
		t.Fatalf("while a replica moved back to n3, chat had %d ready replicas (a min 3 model); views seen: %v", f, low)
	}
}
