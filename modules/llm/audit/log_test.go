package audit

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func entry(i int, actor string) llmapi.AuditEntry {
	return llmapi.AuditEntry{Time: time.Now().UTC().Add(time.Duration(i) * time.Millisecond), Actor: actor,
		Action: "model scaled", Node: "n1", Fields: map[string]any{"model": "chat"}}
}

func segments(t *testing.T, st certmagic.Storage) []segment {
	t.Helper()
	segs, err := listSegments(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

// A reload opens the new config's log before the old one closes: the
// new one goes on writing the segment the old one wrote. Once no config
// holds the log, the next one starts a new segment; another storage has
// a segment of its own.
func TestLogReloadKeepsSegment(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	old := Open(Options{Storage: st})
	old.Record(ctx, entry(0, "alice"))
	next := Open(Options{Storage: st, Config: &Config{MaxEntries: 1000}})
	old.Close()
	next.Record(ctx, entry(1, "bob"))
	if segs := segments(t, st); len(segs) != 1 {
		t.Fatalf("%d segments after a reload, want 1: %v", len(segs), segs)
	}
	other := &certmagic.FileStorage{Path: t.TempDir()}
	elsewhere := Open(Options{Storage: other})
	elsewhere.Record(ctx, entry(2, "carol"))
	elsewhere.Close()
	if segs := segments(t, st); len(segs) != 1 {
		t.Errorf("another storage's entry wrote here: %v", segs)
	}
	next.Close()
	again := Open(Options{Storage: st})
	defer again.Close()
	again.Record(ctx, entry(3, "dave"))
	if segs := segments(t, st); len(segs) != 2 {
		t.Errorf("%d segments after the log was let go, want 2: %v", len(segs), segs)
	}
	p, err := again.Read(ctx, Query{Limit: 10})
	if err != nil || len(p.Entries) != 3 || p.Entries[0].Actor != "dave" || p.Source != "storage" {
		t.Errorf("read back: %+v, %v", p, err)
	}
}

// stream is a Store in memory, or one that does not answer.
type stream struct {
	entries []llmapi.AuditEntry
	down    error
}

func (s *stream) AddAudit(_ context.Context, e llmapi.AuditEntry, _ int) error {
	if s.down != nil {
		return s.down
	}
	e.ID = "1-" + string(rune('0'+len(s.entries)))
	s.entries = append([]llmapi.AuditEntry{e}, s.entries...)
	return nil
}

func (s *stream) ReadAudit(_ context.Context, q Query, _ int) (llmapi.AuditPage, error) {
	if s.down != nil {
		return llmapi.AuditPage{}, s.down
	}
	p := llmapi.AuditPage{Entries: []llmapi.AuditEntry{}, Source: "cluster"}
	for _, e := range s.entries {
		if q.Match(e) {
			p.Entries = append(p.Entries, e)
		}
	}
	return p, nil
}

// In a cluster the log reads the stream; a cursor that is not the
// stream's is the client's mistake; a stream that does not answer gives
// this node's entries with a warning, except for a later page, which only
// the stream has.
func TestLogReadCluster(t *testing.T) {
	st := &certmagic.FileStorage{Path: t.TempDir()}
	ctx := context.Background()
	s := &stream{}
	l := Open(Options{Storage: st, Store: s})
	defer l.Close()
	l.Record(ctx, entry(0, "alice"))
	if p, err := l.Read(ctx, Query{Limit: 10}); err != nil || p.Source != "cluster" || len(p.Entries) != 1 {
		t.Fatalf("from the stream: %+v, %v", p, err)
	}
	_, err := l.Read(ctx, Query{Limit: 10, Cursor: "0000000001.n1.1"})
	if !errors.Is(err, ErrCursor) || !strings.Contains(err.Error(), "start again without cursor") {
		t.Errorf("a storage cursor in a cluster: %v", err)
	}
	s.down = errors.New("connection refused")
	p, err := l.Read(ctx, Query{Limit: 10})
	if err != nil || p.Source != "storage" || len(p.Entries) != 1 || !strings.Contains(p.Warning, "connection refused") {
		t.Errorf("the stream down, a first page: %+v, %v", p, err)
	}
	_, err = l.Read(ctx, Query{Limit: 10, Cursor: "1-0"})
	if !errors.Is(err, ErrStoreDown) || !strings.Contains(err.Error(), "try again when the store answers") {
		t.Errorf("the stream down, a later page: %v", err)
	}
}

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 1, 2, 15, 0, 0, 0, time.UTC)
	q, err := ParseQuery(url.Values{"since": {"1h"}, "until": {"2026-01-02T14:30:00Z"}, "actor": {"alice"}, "limit": {"5"}}, now)
	if err != nil || !q.Since.Equal(now.Add(-time.Hour)) || q.Until.Minute() != 30 || q.Actor != "alice" || q.Limit != 5 {
		t.Errorf("got %+v, %v", q, err)
	}
	if q, _ := ParseQuery(url.Values{}, now); q.Limit != 100 {
		t.Errorf("default limit %d, want 100", q.Limit)
	}
	for _, tc := range []struct {
		name string
		v    url.Values
		want string
	}{
		{"since", url.Values{"since": {"yesterday"}}, `since="yesterday" is neither an RFC 3339 time`},
		{"negative", url.Values{"until": {"-1h"}}, `until="-1h" is neither`},
		{"limit", url.Values{"limit": {"1001"}}, `limit="1001": use a number from 1 to 1000`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseQuery(tc.v, now)
			if !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q of ErrQuery", err, tc.want)
			}
		})
	}
}
