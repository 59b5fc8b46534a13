package audit

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// The storage log keeps entries newest first across segments and days,
// filters them, pages them by cursor, and prunes what is older than keep
// and beyond max_entries.
func TestAuditStorage(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	var log writer
	cfg := &Config{Keep: 0, MaxEntries: 1200}
	// 1500 minutes from midnight cross the next midnight at entry 1440:
	// the day cuts a segment short (the log kept only 300 entries when
	// segments were half of max_entries).
	base := time.Now().UTC().Truncate(24 * time.Hour).Add(-3 * 24 * time.Hour)
	for i := range 1500 {
		e := llmapi.AuditEntry{Time: base.Add(time.Duration(i) * time.Minute), Actor: []string{"alice", "bob"}[i%2], Action: "model scaled",
			Node: "n1", Fields: map[string]any{"model": fmt.Sprint("m", i%3)}}
		if err := log.append(ctx, st, cfg, e, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	all, err := readStorage(ctx, st, Query{Limit: 1000000})
	if err != nil {
		t.Fatal(err)
	}
	// Segments of 300 (a quarter of 1200): the oldest goes when a segment
	// starts that could take the log past 1200, so at least 1200 less two
	// segments stay.
	if n := len(all.Entries); n < 600 || n > 1200 {
		t.Errorf("%d entries kept; want at most 1200 and no fewer than 600", n)
	}
	for i := 1; i < len(all.Entries); i++ {
		if all.Entries[i-1].ID <= all.Entries[i].ID || all.Entries[i-1].Time.Before(all.Entries[i].Time) {
			t.Fatalf("not newest first at %d: %s then %s", i, all.Entries[i-1].ID, all.Entries[i].ID)
		}
	}
	q := Query{Actor: "alice", Model: "m0", Limit: 100}
	seen := 0
	for {
		p, err := readStorage(ctx, st, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Entries {
			if e.Actor != "alice" || e.Fields["model"] != "m0" {
				t.Fatalf("filter let through %+v", e)
			}
		}
		seen += len(p.Entries)
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	want := 0
	for _, e := range all.Entries {
		if e.Actor == "alice" && e.Fields["model"] == "m0" {
			want++
		}
	}
	if seen != want || want == 0 {
		t.Errorf("paged %d entries, want %d", seen, want)
	}
}

// BenchmarkAuditAppend is the cost of recording one entry in Caddy
// storage (a file system), in a segment of up to 1000 entries.
func BenchmarkAuditAppend(b *testing.B) {
	st := &certmagic.FileStorage{Path: b.TempDir()}
	ctx := context.Background()
	var log writer
	cfg := &Config{}
	for i := 0; b.Loop(); i++ {
		e := llmapi.AuditEntry{Time: time.Now().UTC(), Actor: "alice", Action: "model scaled", Node: "n1",
			Fields: map[string]any{"model": "chat", "min": 1, "max": 4}}
		if err := log.append(ctx, st, cfg, e, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditRead reads the newest 100 of 10000 entries with a filter.
func BenchmarkAuditRead(b *testing.B) {
	st := &certmagic.FileStorage{Path: b.TempDir()}
	ctx := context.Background()
	var log writer
	cfg := &Config{}
	t0 := time.Now().UTC().Add(-time.Hour)
	for i := range 10000 {
		e := llmapi.AuditEntry{Time: t0.Add(time.Duration(i) * time.Millisecond), Actor: []string{"alice", "bob"}[i%2], Action: "model scaled",
			Node: "n1", Fields: map[string]any{"model": "chat"}}
		if err := log.append(ctx, st, cfg, e, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		if _, err := readStorage(ctx, st, Query{Actor: "alice", Limit: 100}); err != nil {
			b.Fatal(err)
		}
	}
}
