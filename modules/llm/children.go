package llm

import (
	"sync"
	"sync/atomic"
)

// Children keeps a metric vector's children by their label values, for
// the request path: the vector's WithLabelValues checks and hashes every
// value and takes the vector's lock on each call, which costs more than
// the count it leads to. A lookup here reads an immutable map, without a
// lock; adding a child, once per set of values, copies it.
//
// Only vectors whose children are never deleted belong here: a child
// deleted from its vector would still be counted, and no longer exported.
type Children[K comparable, M any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]M]
}

// Get returns the child kept for k.
func (c *Children[K, M]) Get(k K) (M, bool) {
	if m := c.m.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero M
	return zero, false
}

// Add keeps v for k, unless a child is kept for k already; it returns
// the child kept.
func (c *Children[K, M]) Add(k K, v M) M {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if have, ok := (*old)[k]; ok {
			return have
		}
	}
	n := make(map[K]M, 1+lenOf(old))
	if old != nil {
		for k2, v2 := range *old {
			n[k2] = v2
		}
	}
	n[k] = v
	c.m.Store(&n)
	return v
}

func lenOf[K comparable, M any](m *map[K]M) int {
	if m == nil {
		return 0
	}
	return len(*m)
}
