package llmcache

// keyTable maps the built-in matcher's keys (and the store's exact-key
// hashes) to 32-bit values. It is an open-addressing table with linear
// probing over one array of 8-byte slots, a key's fingerprint and its
// value side by side: a store of 100k questions holds about a million
// keys, far more than the processor's caches, so a lookup costs the
// memory reads it makes, and here a lookup of a key reads one slot's
// cache line, where a Go map reads its directory, a table and a group's
// control word before the slot.
//
// A key is kept as a 32-bit fingerprint (a mix of its 64 bits), which
// also gives its home slot, so the table takes 8 bytes a slot instead of
// 16 and a large one twice as much of it stays in the caches. Two keys
// with one fingerprint are one key to the table: their entries share a
// value. For the matcher that only adds a candidate, which is checked
// against the question itself; for the store's exact keys a hit compares
// the key itself. Among a million keys, a few such pairs are expected.
// A deletion shifts the slots after it back (no tombstones), so probe
// lengths stay short however many keys come and go. Fingerprint 0 marks
// an empty slot, so a key with that fingerprint is kept beside the
// array.
type keyTable struct {
	slots []keySlot // a power of two of them, at most 3/4 used
	n     int       // keys in slots
	shift uint      // 32 less the table's bits

	hasZero bool   // a key of fingerprint 0 is present
	zeroVal uint32 // … with this value
}

type keySlot struct {
	fp, val uint32
}

const keyTableMin = 1024

// fingerprint is what the table keeps of k: its top 32 bits after a
// multiplication that spreads every bit of k over them.
func fingerprint(k setKey) uint32 {
	return uint32((uint64(k) * 0x9e3779b97f4a7c15) >> 32)
}

// home is a fingerprint's first slot: its top bits.
func (t *keyTable) home(fp uint32) int {
	return int(fp >> t.shift)
}

// get returns k's value.
func (t *keyTable) get(k setKey) (uint32, bool) {
	fp := fingerprint(k)
	if fp == 0 {
		return t.zeroVal, t.hasZero
	}
	if t.n == 0 {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := t.home(fp); ; i = (i + 1) & mask {
		switch s := &t.slots[i]; s.fp {
		case fp:
			return s.val, true
		case 0:
			return 0, false
		}
	}
}

// touch reads the home slot of each key and returns nothing of use: the
// reads do not depend on one another, so the processor fetches their
// cache lines together, and the lookups after it find them in cache. In
// a table larger than the caches that is most of a lookup's cost, paid
// once for a question's keys instead of once per key.
//
//go:noinline
func (t *keyTable) touch(ks []setKey) uint64 {
	if t.n == 0 {
		return 0
	}
	var x uint32
	for _, k := range ks {
		x += t.slots[t.home(fingerprint(k))].fp
	}
	return uint64(x)
}

// set gives k the value v.
func (t *keyTable) set(k setKey, v uint32) {
	fp := fingerprint(k)
	if fp == 0 {
		t.hasZero, t.zeroVal = true, v
		return
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.home(fp); ; i = (i + 1) & mask {
		switch s := &t.slots[i]; s.fp {
		case fp:
			s.val = v
			return
		case 0:
			s.fp, s.val = fp, v
			t.n++
			return
		}
	}
}

// del removes k.
func (t *keyTable) del(k setKey) {
	fp := fingerprint(k)
	if fp == 0 {
		t.hasZero, t.zeroVal = false, 0
		return
	}
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(fp)
	for ; t.slots[i].fp != fp; i = (i + 1) & mask {
		if t.slots[i].fp == 0 {
			return
		}
	}
	// Shift back each later slot of the run whose home is not between
	// the hole and it (cyclically), so that every key stays reachable
	// from its home without crossing an empty slot.
	for j := (i + 1) & mask; t.slots[j].fp != 0; j = (j + 1) & mask {
		h := t.home(t.slots[j].fp)
		if (j-h)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = keySlot{}
	t.n--
}

func (t *keyTable) grow() {
	old := t.slots
	size := max(keyTableMin, 2*len(old))
	t.slots = make([]keySlot, size)
	t.shift = uint(32 - bitsOf(size))
	mask := size - 1
	for _, s := range old {
		if s.fp == 0 {
			continue
		}
		i := t.home(s.fp)
		for t.slots[i].fp != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = s
	}
}

// bitsOf is log2 of a power of two.
func bitsOf(n int) int {
	b := 0
	for n > 1 {
		n >>= 1
		b++
	}
	return b
}
