package llm

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestChildrenKeepsTheFirst adds children for the same and different keys
// from many goroutines: each key keeps the first child added, and every
// Get after an Add finds it.
func TestChildrenKeepsTheFirst(t *testing.T) {
	var c Children[[2]string, *int]
	if _, ok := c.Get([2]string{"a", "b"}); ok {
		t.Fatal("an empty Children found a child")
	}
	var wg sync.WaitGroup
	got := make([]*int, 64)
	for i := range got {
		wg.Go(func() {
			k := [2]string{"m", fmt.Sprint(i % 8)}
			v := new(int)
			*v = i
			got[i] = c.Add(k, v)
			if g, ok := c.Get(k); !ok || g != got[i] {
				t.Errorf("Get(%v) after Add = %v, %v; want the child Add returned", k, g, ok)
			}
		})
	}
	wg.Wait()
	for i, v := range got {
		if w := got[i%8]; v != w {
			t.Errorf("key %d: two children kept (%d and %d)", i%8, *v, *w)
		}
	}
}

// BenchmarkCountOnRequestPath counts a labelled counter from every
// processor, as the request path does: through the vector, and through
// Children.
func BenchmarkCountOnRequestPath(b *testing.B) {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "bench_total"}, []string{"check", "stage", "outcome"})
	b.Run("WithLabelValues", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				vec.WithLabelValues("pii", "input", "passed").Inc()
			}
		})
	})
	b.Run("Children", func(b *testing.B) {
		var c Children[[3]string, prometheus.Counter]
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				k := [3]string{"pii", "input", "passed"}
				m, ok := c.Get(k)
				if !ok {
					m = c.Add(k, vec.WithLabelValues(k[:]...))
				}
				m.Inc()
			}
		})
	})
}
