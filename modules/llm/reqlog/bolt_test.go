package reqlog

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// entries makes n records ending a millisecond apart from at, cycling
// through three keys, two tenants, statuses and models.
func entries(n int, at time.Time) []Entry { return entriesFrom(0, n, at) }

// reqID is the id of the i-th request of entries arriving at.
func reqID(i int, arrived time.Time) string {
	return fmt.Sprintf("req_%012x%016d", arrived.UnixMilli(), i)
}

// entriesFrom is entries numbered from first.
func entriesFrom(first, n int, at time.Time) []Entry {
	es := make([]Entry, n)
	statuses := []int{200, 200, 429, 502, 200}
	for j := range es {
		i := first + j
		end := at.Add(time.Duration(i) * time.Millisecond)
		es[j] = Entry{Rec: llmapi.RequestRecord{
			ID: reqID(i, end.Add(-time.Second)), Time: end.Add(-time.Second), End: end, API: "chat/completions",
			KeyID: fmt.Sprintf("key-%d", i%3), Tenant: []string{"acme/research/alpha", "globex/ops/web"}[i%2],
			Model: "chat", Served: []string{"chat", "chat-small"}[i%2], Status: statuses[i%len(statuses)],
		}}
	}
	return es
}

func openTest(t testing.TB) *Bolt {
	t.Helper()
	b, err := OpenBolt(filepath.Join(t.TempDir(), "requests.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func page(t *testing.T, s Store, q string) llmapi.RequestPage {
	t.Helper()
	v, _ := url.ParseQuery(q)
	f, err := ParseFilter(v, time.Now())
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	p, err := s.Page(context.Background(), f)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return p
}

func TestBoltPagesEveryRecordOnceNewestFirst(t *testing.T) {
	b := openTest(t)
	at := time.Now().Add(-time.Minute)
	if err := b.Append(context.Background(), entries(1000, at), Retention{}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var last time.Time
	for cursor, pages := "", 0; ; pages++ {
		p := page(t, b, "limit=333&before="+cursor)
		for _, r := range p.Data {
			if seen[r.ID] {
				t.Fatalf("%s twice", r.ID)
			}
			if !last.IsZero() && r.End.After(last) {
				t.Fatalf("%s out of order", r.ID)
			}
			seen[r.ID], last = true, r.End
		}
		if !p.HasMore {
			break
		}
		cursor = p.Next
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if len(seen) != 1000 {
		t.Fatalf("paged %d records, want 1000", len(seen))
	}
}

func TestBoltFilters(t *testing.T) {
	b := openTest(t)
	if err := b.Append(context.Background(), entries(100, time.Now().Add(-time.Minute)), Retention{}); err != nil {
		t.Fatal(err)
	}
	for q, want := range map[string]int{
		"key=key-1":                      33,
		"tenant=acme":                    50,
		"tenant=acme/research":           50,
		"tenant=acm":                     0, // a tenant is a whole path segment
		"model=chat-small":               50,
		"model=chat":                     100, // asked
		"status=429":                     20,
		"status=5xx":                     20,
		"status=error":                   40,
		"key=key-1&status=error":         13,
		"q=0000000000000042":             1,
		"since=1h":                       100,
		"until=2h":                       0,
		"tenant=globex&model=chat-small": 50,
	} {
		if got := len(page(t, b, q+"&limit=1000").Data); got != want {
			t.Errorf("%s: %d records, want %d", q, got, want)
		}
	}
}

func TestBoltFollowsNewRecordsOldestFirst(t *testing.T) {
	b := openTest(t)
	at := time.Now().Add(-time.Minute)
	es := entries(10, at)
	if err := b.Append(context.Background(), es[:4], Retention{}); err != nil {
		t.Fatal(err)
	}
	p := page(t, b, "limit=2") // the newest two, then follow from the newest
	if p.Data[0].ID != es[3].Rec.ID {
		t.Fatalf("newest is %s", p.Data[0].ID)
	}
	follow := page(t, b, "after="+p.Next) // from the second newest on
	if len(follow.Data) != 1 || follow.Data[0].ID != es[3].Rec.ID {
		t.Fatalf("follow after the second newest: %+v", follow.Data)
	}
	cursor := follow.Next
	if err := b.Append(context.Background(), es[4:], Retention{}); err != nil {
		t.Fatal(err)
	}
	next := page(t, b, "after="+cursor)
	if len(next.Data) != 6 || next.Data[0].ID != es[4].Rec.ID || next.Data[5].ID != es[9].Rec.ID {
		t.Fatalf("followed %d records", len(next.Data))
	}
	if again := page(t, b, "after="+next.Next); len(again.Data) != 0 || again.Next != next.Next {
		t.Fatalf("nothing new should give nothing and the same cursor: %+v", again)
	}
}

func TestBoltRetention(t *testing.T) {
	b := openTest(t)
	old := time.Now().Add(-3 * time.Hour)
	es := entries(50, old)
	for i := range es[:10] {
		es[i].Bodies = &Bodies{Request: "q", Response: "a"}
	}
	keep := Retention{MaxAge: 2 * time.Hour, MaxRecords: 100, BodyMaxAge: time.Hour}
	if err := b.Append(context.Background(), es, Retention{}); err != nil {
		t.Fatal(err)
	}
	fresh := entriesFrom(1000, 150, time.Now().Add(-time.Minute-time.Second))
	fresh[149].Bodies = &Bodies{Request: "q2", Response: "a2"}
	if err := b.Append(context.Background(), fresh, keep); err != nil {
		t.Fatal(err)
	}
	p := page(t, b, "limit=1000")
	if len(p.Data) != 100 || b.n != 100 {
		t.Fatalf("kept %d records (counted %d), want the newest 100", len(p.Data), b.n)
	}
	if p.Data[99].ID != fresh[50].Rec.ID {
		t.Fatalf("oldest kept is %s, want %s", p.Data[99].ID, fresh[50].Rec.ID)
	}
	if _, err := b.Get(context.Background(), es[1].Rec.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a dropped record is still found: %v", err)
	}
	d, err := b.Get(context.Background(), fresh[149].Rec.ID)
	if err != nil || d.RequestBody != "q2" || d.ResponseBody != "a2" {
		t.Fatalf("kept bodies: %+v %v", d, err)
	}
	// Reopened, the count is read again.
	path := b.db.Path()
	_ = b.Close()
	b2, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if b2.n != 100 {
		t.Fatalf("reopened with %d records counted", b2.n)
	}
}

func TestBadQueries(t *testing.T) {
	b := openTest(t)
	for _, q := range []string{"limit=0", "limit=5000", "limit=x", "status=99", "status=6xx", "since=yesterday", "before=a&after=b"} {
		v, _ := url.ParseQuery(q)
		if _, err := ParseFilter(v, time.Now()); err == nil {
			t.Errorf("%s: accepted", q)
		}
	}
	v, _ := url.ParseQuery("before=zz")
	f, _ := ParseFilter(v, time.Now())
	if _, err := b.Page(context.Background(), f); !errors.Is(err, ErrCursor) {
		t.Errorf("a cursor the log did not give: %v", err)
	}
}
