package llmcache

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The sketch counts what it is shown (never less, up to 15), forgets by
// halving after its period, and tells apart what it was not shown.
func TestSketch(t *testing.T) {
	s := newSketch(1000)
	for i := range 7 {
		s.add(42)
		if i < 3 {
			s.add(43)
		}
	}
	if got := s.estimate(42); got != 7 {
		t.Errorf("42 counted 7 times: estimate %d", got)
	}
	if got := s.estimate(43); got != 3 {
		t.Errorf("43 counted 3 times: estimate %d", got)
	}
	if got := s.estimate(44); got != 0 {
		t.Errorf("44 never counted: estimate %d", got)
	}
	for range 40 {
		s.add(45)
	}
	if got := s.estimate(45); got != 15 {
		t.Errorf("45 counted 40 times: estimate %d, want the 4-bit ceiling 15", got)
	}
	// Many other keys: a key's estimate stays at least its count.
	for k := uint64(1000); k < 3000; k++ {
		s.add(k * 0x9e3779b97f4a7c15)
	}
	if s.estimate(42) < 7 || s.estimate(43) < 3 {
		t.Errorf("after 2000 other keys: 42 → %d, 43 → %d; an estimate is never below the count", s.estimate(42), s.estimate(43))
	}
	before := s.estimate(42)
	s.halveAll()
	if got := s.estimate(42); got != before/2 {
		t.Errorf("halved: 42 → %d, want %d", got, before/2)
	}
	// The period halves on its own.
	p := newSketch(1024)
	for range 5 {
		p.add(7)
	}
	for range p.every - 5 {
		p.add(8)
	}
	if got, other := p.estimate(7), p.estimate(8); got != 2 || other != 7 {
		t.Errorf("after a period: estimates %d and %d, want 5 halved to 2 and 15 halved to 7", got, other)
	}
}

// A full store admits a question asked more often than the entry the hand
// would evict, and refuses one asked as often; a store with room admits
// everything.
func TestAdmits(t *testing.T) {
	s, err := newEntries(6 << 10)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if !s.admits(entryID("new"), 0, now.UnixNano()) {
		t.Fatal("an empty store refused an answer")
	}
	for i := range 20 {
		q := fmt.Sprintf("how do I reset ticket %d", i)
		e := &entry{key: q, bucket: "b", question: q, an: analyze(q), expires: now.Add(time.Hour),
			ans: &answer{Chat: true, Choices: []answerChoice{{Content: strings.Repeat("an answer ", 50), FinishReason: "stop"}}}}
		s.seen(entryID(e.key), 0)
		s.putLocal(e)
	}
	if s.bytes+s.bytes/int64(s.count) <= s.maxBytes {
		t.Fatalf("store not full after 20 entries: %d bytes of %d", s.bytes, s.maxBytes)
	}
	s.seen(entryID("once"), 0)
	if s.admits(entryID("once"), 0, now.UnixNano()) {
		t.Error("a question asked once was admitted over an entry asked once")
	}
	s.seen(entryID("twice"), 0)
	s.seen(entryID("twice"), 0)
	if !s.admits(entryID("twice"), 0, now.UnixNano()) {
		t.Error("a question asked twice was refused for an entry asked once")
	}
}
