package llmcache

import "iter"

// postings index entries by the built-in matcher's keys (a question's
// set of words, and that set less each word). A store of 100k questions
// holds about a million keys, so their table holds no pointers (the
// garbage collector skips it) and a key with one entry, most of them,
// takes no allocation: its value is the entry's number (its place in the
// store's ring, + 1); a key shared by several entries points to a list
// of numbers.
type postings struct {
	keys  keyTable   // entry number, or listed | list index
	lists [][]uint32 // entry numbers of keys shared by several
	free  []uint32   // unused lists
}

// listed marks a value of keys that is an index of lists.
const listed = 1 << 31

func newPostings() postings {
	return postings{}
}

// add indexes the entry e at slot.
func (p *postings) add(slot uint32, e *entry) {
	num := slot + 1
	var kb [maxTouched]setKey
	ks := e.appendSetKeys(kb[:0])
	p.keys.touch(ks)
	for _, k := range ks {
		v, ok := p.keys.get(k)
		switch {
		case !ok:
			p.keys.set(k, num)
		case v&listed != 0:
			p.lists[v&^listed] = append(p.lists[v&^listed], num)
		default:
			var i uint32
			if len(p.free) > 0 {
				i = p.free[len(p.free)-1]
				p.free = p.free[:len(p.free)-1]
				p.lists[i] = append(p.lists[i][:0], v, num)
			} else {
				i = uint32(len(p.lists))
				p.lists = append(p.lists, []uint32{v, num})
			}
			p.keys.set(k, listed|i)
		}
	}
}

// maxTouched is how many keys of a question are gathered on the stack
// (see keyTable.touch); a longer question's go to the heap.
const maxTouched = 48

// remove unindexes the entry e at slot.
func (p *postings) remove(slot uint32, e *entry) {
	num := slot + 1
	var kb [maxTouched]setKey
	ks := e.appendSetKeys(kb[:0])
	p.keys.touch(ks)
	for _, k := range ks {
		v, ok := p.keys.get(k)
		switch {
		case !ok:
		case v&listed == 0:
			if v == num {
				p.keys.del(k)
			}
		default:
			i := v &^ listed
			l := p.lists[i]
			for j, n := range l {
				if n == num {
					l[j] = l[len(l)-1]
					l = l[:len(l)-1]
					break
				}
			}
			p.lists[i] = l
			if len(l) == 1 {
				p.keys.set(k, l[0])
				p.free = append(p.free, i)
			}
		}
	}
}

// all yields the places of the entries under k.
func (p *postings) all(k setKey) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		v, ok := p.keys.get(k)
		if !ok {
			return
		}
		if v&listed == 0 {
			yield(v - 1)
			return
		}
		for _, n := range p.lists[v&^listed] {
			if !yield(n - 1) {
				return
			}
		}
	}
}
