package kbindex

import "testing"

func TestPostingRoundTrip(t *testing.T) {
	docs := []uint32{0, 1, 2, 130, 20000, 20001, 1 << 28, 1<<32 - 2}
	tfs := []uint16{1, 2, 127, 128, 300, 1, 65535, 7}
	var p posting
	for i, d := range docs {
		p.add(d, tfs[i])
	}
	i := 0
	for it := p.iter(); it.next(); i++ {
		if it.doc != docs[i] || it.tf != uint32(tfs[i]) {
			t.Errorf("pair %d = (%d, %d), want (%d, %d)", i, it.doc, it.tf, docs[i], tfs[i])
		}
	}
	if i != len(docs) || p.n != uint32(len(docs)) {
		t.Errorf("%d pairs read, n %d, want %d", i, p.n, len(docs))
	}
}

func TestDot8Extremes(t *testing.T) {
	for _, dims := range []int{3, 384, 1536, 3072, 4099} {
		a, b := make([]int16, dims), make([]int8, dims)
		for i := range a {
			a[i], b[i] = 32767, 127
		}
		if got, want := dot8(a, b), int64(dims)*32767*127; got != want {
			t.Errorf("%d dims at the extremes: %d, want %d", dims, got, want)
		}
		for i := range a {
			a[i], b[i] = -32767, 127
		}
		if got, want := dot8(a, b), -int64(dims)*32767*127; got != want {
			t.Errorf("%d dims, negative: %d, want %d", dims, got, want)
		}
	}
}
