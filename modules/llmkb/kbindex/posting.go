package kbindex

import "encoding/binary"

// posting lists the chunks a term occurs in, in increasing order, with
// how often: pairs of varints (the gap from the previous chunk number,
// the count), about 2.5 bytes a pair where plain integers take 6.
type posting struct {
	buf  []byte
	last uint32 // the last chunk number added
	n    uint32 // pairs
}

func (p *posting) add(doc uint32, tf uint16) {
	gap := doc
	if p.n > 0 {
		gap = doc - p.last
	}
	p.buf = binary.AppendUvarint(p.buf, uint64(gap))
	p.buf = binary.AppendUvarint(p.buf, uint64(tf))
	p.last = doc
	p.n++
}

// uvarint decodes the varint at buf[i:] (one the package wrote).
func uvarint(buf []byte, i int) (uint32, int) {
	var v uint32
	for shift := uint(0); ; shift += 7 {
		b := buf[i]
		i++
		v |= uint32(b&0x7f) << shift
		if b < 0x80 {
			return v, i
		}
	}
}

// postingIter walks a posting: for it := p.iter(); it.next(); { it.doc, it.tf }.
type postingIter struct {
	buf []byte
	i   int
	doc uint32
	tf  uint32
	n   uint32
}

func (p *posting) iter() postingIter { return postingIter{buf: p.buf} }

func (it *postingIter) next() bool {
	if it.i >= len(it.buf) {
		return false
	}
	gap, i := uvarint(it.buf, it.i)
	if it.n > 0 {
		gap += it.doc
	}
	it.doc = gap
	it.tf, it.i = uvarint(it.buf, i)
	it.n++
	return true
}
