package llmcache

import (
	"math/rand/v2"
	"testing"
)

// TestKeyTableAgreesWithAMap runs random sets and deletions, with keys
// drawn from a small range so that runs of probes, wrapping around the
// table's end and shifts after deletions all happen, and checks every
// key against a Go map of fingerprints (the table's contract: keys of one
// fingerprint are one key) after each step.
func TestKeyTableAgreesWithAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, keys := range []uint64{50, 3000, 40000} {
		var tb keyTable
		want := map[uint32]uint32{} // by fingerprint
		keyOf := map[uint32]setKey{}
		for step := range 200_000 {
			k := setKey(rng.Uint64N(keys))
			switch rng.IntN(6) {
			case 0, 1:
				k = setKey(rng.Uint64()) // anywhere, the top included
			case 2:
				k = setKey(rng.IntN(2)) // 0 (fingerprint 0, kept beside the slots) and 1, often
			}
			switch rng.IntN(3) {
			case 0, 1:
				v := rng.Uint32()
				tb.set(k, v)
				want[fingerprint(k)] = v
				keyOf[fingerprint(k)] = k
			default:
				tb.del(k)
				delete(want, fingerprint(k))
			}
			if step%997 == 0 || step > 199_000 {
				n := tb.n
				if tb.hasZero {
					n++
				}
				if n != len(want) {
					t.Fatalf("keys %d, step %d: %d keys, want %d", keys, step, n, len(want))
				}
				for fp, v := range want {
					k := keyOf[fp]
					if got, ok := tb.get(k); !ok || got != v {
						t.Fatalf("keys %d, step %d: key %d = %d, %v; want %d", keys, step, k, got, ok, v)
					}
				}
			}
			if got, ok := tb.get(k); ok != hasKey(want, fingerprint(k)) || got != want[fingerprint(k)] {
				t.Fatalf("keys %d, step %d: key %d = %d, %v; want %d, %v", keys, step, k, got, ok, want[fingerprint(k)], hasKey(want, fingerprint(k)))
			}
		}
		if keys == 40000 && len(tb.slots) < 2*keyTableMin {
			t.Fatalf("the table never grew: %d slots", len(tb.slots))
		}
	}
}

func hasKey(m map[uint32]uint32, k uint32) bool {
	_, ok := m[k]
	return ok
}
