package llmcache

// keyTable maps the built-in matcher's keys to postings values. It is an
// open-addressing table with linear probing over one array of 16-byte
// slots, key and value side by side: a store of 100k questions holds
// about a million keys, far more than the processor's caches, so a lookup
// costs the memory reads it makes, and here a lookup of a key reads one
// slot's cache line, where a Go map reads its directory, a table and a
// group's control word before the slot. Keys are hashes already, spread
// over the table by a multiplication. A deletion shifts the slots after
// it back (no tombstones), so probe lengths stay short however many keys
// come and go. Key 0 marks an empty slot, so the key 0 itself is kept
// beside the array.
type keyTable struct {
	slots []keySlot // a power of two of them, at most 3/4 used
	n     int       // keys in slots
	shift uint      // 64 less the table's bits

	hasZero bool   // the key 0 is present
	zeroVal uint32 // … with this value
}

type keySlot struct {
	key uint64
	val uint32
}

const keyTableMin = 1024

func (t *keyTable) home(k uint64) int {
	return int((k * 0x9e3779b97f4a7c15) >> t.shift)
}

// get returns k's value.
func (t *keyTable) get(k setKey) (uint32, bool) {
	if k == 0 {
		return t.zeroVal, t.hasZero
	}
	if t.n == 0 {
		return 0, false
	}
	key, mask := uint64(k), len(t.slots)-1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch s := &t.slots[i]; s.key {
		case key:
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
	var x uint64
	for _, k := range ks {
		x += t.slots[t.home(uint64(k))].key
	}
	return x
}

// set gives k the value v.
func (t *keyTable) set(k setKey, v uint32) {
	if k == 0 {
		t.hasZero, t.zeroVal = true, v
		return
	}
	if (t.n+1)*4 > len(t.slots)*3 {
		t.grow()
	}
	key, mask := uint64(k), len(t.slots)-1
	for i := t.home(key); ; i = (i + 1) & mask {
		switch s := &t.slots[i]; s.key {
		case key:
			s.val = v
			return
		case 0:
			s.key, s.val = key, v
			t.n++
			return
		}
	}
}

// del removes k.
func (t *keyTable) del(k setKey) {
	if k == 0 {
		t.hasZero, t.zeroVal = false, 0
		return
	}
	if t.n == 0 {
		return
	}
	key, mask := uint64(k), len(t.slots)-1
	i := t.home(key)
	for ; t.slots[i].key != key; i = (i + 1) & mask {
		if t.slots[i].key == 0 {
			return
		}
	}
	// Shift back each later slot of the run whose home is not between
	// the hole and it (cyclically), so that every key stays reachable
	// from its home without crossing an empty slot.
	for j := (i + 1) & mask; t.slots[j].key != 0; j = (j + 1) & mask {
		h := t.home(t.slots[j].key)
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
	t.shift = uint(64 - bitsOf(size))
	mask := size - 1
	for _, s := range old {
		if s.key == 0 {
			continue
		}
		i := t.home(s.key)
		for t.slots[i].key != 0 {
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
