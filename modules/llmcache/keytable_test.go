package llmcache

import (
	"math/rand/v2"
	"testing"
)

// TestKeyTableAgreesWithAMap runs random sets and deletions, with keys
// drawn from a small range so that runs of probes, wrapping around the
// table's end and shifts after deletions all happen, and checks every
// key against a Go map after each step.
func TestKeyTableAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, keys := range []uint64{50, 3000, 40000} {
		var tb keyTable
		want := map[setKey]uint32{}
		for step := range 200_000 {
			k := setKey(rng.Uint64N(keys))
			switch rng.IntN(6) {
			case 0, 1:
				k = setKey(rng.Uint64()) // anywhere, the top included
			case 2:
				k = setKey(rng.IntN(2)) // 0 (kept beside the slots) and 1, often
			}
			switch rng.IntN(3) {
			case 0, 1:
				v := rng.Uint32()
				tb.set(k, v)
				want[k] = v
			default:
				tb.del(k)
				delete(want, k)
			}
			if step%997 == 0 || step > 199_000 {
				n := tb.n
				if tb.hasZero {
					n++
				}
				if n != len(want) {
					t.Fatalf("keys %d, step %d: %d keys, want %d", keys, step, n, len(want))
				}
				for k, v := range want {
					if got, ok := tb.get(k); !ok || got != v {
						t.Fatalf("keys %d, step %d: key %d = %d, %v; want %d", keys, step, k, got, ok, v)
					}
				}
			}
			if got, ok := tb.get(k); ok != hasKey(want, k) || got != want[k] {
				t.Fatalf("keys %d, step %d: key %d = %d, %v; want %d, %v", keys, step, k, got, ok, want[k], hasKey(want, k))
			}
		}
		if keys == 40000 && len(tb.slots) < 2*keyTableMin {
			t.Fatalf("the table never grew: %d slots", len(tb.slots))
		}
	}
}

func hasKey(m map[setKey]uint32, k setKey) bool {
	_, ok := m[k]
	return ok
}
