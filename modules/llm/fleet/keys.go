package fleet

import (
	"net/http"
	"sync/atomic"
)

// An outside provider's replica may carry several keys (a header with
// several values). Requests are spread over them in turn (a key given
// n times takes n turns), and a key the provider refused rests until the
// time RestKey sets, while the others serve.

// PickKey is the key the next request sends: the next in turn that is
// not resting at now (unix nanos), or, when all rest, the one that rests
// least.
func (r *Replica) PickKey(now int64) int {
	n := r.Keys()
	if n == 1 {
		return 0
	}
	rest := r.keyRests(n)
	start := int((r.keyTurn.Add(1) - 1) % uint32(n))
	best, bestUntil := start, int64(1<<63-1)
	for j := range n {
		i := (start + j) % n
		until := rest[i].Load()
		if until <= now {
			return i
		}
		if until < bestUntil {
			best, bestUntil = i, until
		}
	}
	return best
}

// RestKey rests key (and the same key wherever it is given again) until
// until (unix nanos).
func (r *Replica) RestKey(key int, until int64) {
	n := r.Keys()
	if n == 1 {
		return
	}
	rest := r.keyRests(n)
	for _, v := range r.Header {
		if len(v) != n {
			continue
		}
		for i := range v {
			if v[i] == v[key%n] && rest[i].Load() < until {
				rest[i].Store(until)
			}
		}
		return
	}
}

// KeysRestUntil is until when (unix nanos) every key of the replica
// rests, or 0 when one is free at now.
func (r *Replica) KeysRestUntil(now int64) int64 {
	n := r.Keys()
	rest := r.keyRests(n)
	least := int64(1<<63 - 1)
	for i := range rest {
		least = min(least, rest[i].Load())
	}
	if least <= now {
		return 0
	}
	return least
}

func (r *Replica) keyRests(n int) []atomic.Int64 {
	if p := r.keyRest.Load(); p != nil && len(*p) == n {
		return *p
	}
	s := make([]atomic.Int64, n)
	if r.keyRest.CompareAndSwap(nil, &s) {
		return s
	}
	return *r.keyRest.Load()
}

// SetHeadersKey adds the replica's headers to a request's, with key as
// the one of its keys sent.
func (r *Replica) SetHeadersKey(dst http.Header, key int) {
	for k, v := range r.Header {
		if len(v) > 1 {
			i := key % len(v)
			dst[k] = v[i : i+1]
			continue
		}
		dst[k] = v
	}
}
