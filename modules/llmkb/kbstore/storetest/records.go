package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

func testPutGet(t *testing.T, s kbstore.Store) {
	body := []byte(`{"id":"file-1","filename":"a.txt","bytes":3,"nested":{"b":[1,2,3],"a":null}}`)
	must(t, s.Put(ctx(t), kbstore.KindFile, "file-1", body), "Put")
	wantBody(t, s, kbstore.KindFile, "file-1", body)

	again := []byte(`{"id":"file-1","filename":"b.txt"}`)
	must(t, s.Put(ctx(t), kbstore.KindFile, "file-1", again), "Put over a record")
	wantBody(t, s, kbstore.KindFile, "file-1", again)
}

func testGetAbsent(t *testing.T, s kbstore.Store) {
	wantAbsent(t, s, kbstore.KindFile, "file-none")
	must(t, s.Put(ctx(t), kbstore.KindFile, "file-1", []byte(`{}`)), "Put")
	wantAbsent(t, s, kbstore.KindFile, "file-")
	wantAbsent(t, s, kbstore.KindFile, "file-10")
}

func testKindsApart(t *testing.T, s kbstore.Store) {
	must(t, s.Put(ctx(t), kbstore.KindFile, "x", []byte(`{"kind":"file"}`)), "Put file")
	must(t, s.Put(ctx(t), kbstore.KindStore, "x", []byte(`{"kind":"store"}`)), "Put store")
	wantBody(t, s, kbstore.KindFile, "x", []byte(`{"kind":"file"}`))
	wantBody(t, s, kbstore.KindStore, "x", []byte(`{"kind":"store"}`))
	wantAbsent(t, s, kbstore.KindBatch, "x")
	if ids, _ := listIDs(t, s, kbstore.KindStore, ""); !slices.Equal(ids, []string{"x"}) {
		t.Fatalf("List(store) = %q, want [x]", ids)
	}
	must(t, s.Delete(ctx(t), kbstore.KindFile, "x"), "Delete file")
	wantBody(t, s, kbstore.KindStore, "x", []byte(`{"kind":"store"}`))
}

func testDelete(t *testing.T, s kbstore.Store) {
	must(t, s.Put(ctx(t), kbstore.KindBatch, "b1", []byte(`{"id":"b1"}`)), "Put")
	must(t, s.Put(ctx(t), kbstore.KindBatch, "b2", []byte(`{"id":"b2"}`)), "Put")
	must(t, s.Delete(ctx(t), kbstore.KindBatch, "b1"), "Delete")
	wantAbsent(t, s, kbstore.KindBatch, "b1")
	wantBody(t, s, kbstore.KindBatch, "b2", []byte(`{"id":"b2"}`))
	// Deleting what is absent is no error: a retried delete succeeds.
	must(t, s.Delete(ctx(t), kbstore.KindBatch, "b1"), "Delete of an absent record")
	must(t, s.Delete(ctx(t), "kind-never-written", "b1"), "Delete in a kind never written")
}

func testListPrefixAndOrder(t *testing.T, s kbstore.Store) {
	ids := []string{"vs_2/file-b", "vs_1/file-b", "vs_10/file-a", "vs_1/file-a", "vs_1", "vs_1/file-a0", "other"}
	for _, id := range ids {
		must(t, s.Put(ctx(t), kbstore.KindStoreFile, id, fmt.Appendf(nil, `{"id":%q}`, id)), "Put "+id)
	}
	cases := []struct {
		prefix string
		want   []string
	}{
		{"vs_1/", []string{"vs_1/file-a", "vs_1/file-a0", "vs_1/file-b"}},
		{"vs_1", []string{"vs_1", "vs_1/file-a", "vs_1/file-a0", "vs_1/file-b", "vs_10/file-a"}},
		{"", []string{"other", "vs_1", "vs_1/file-a", "vs_1/file-a0", "vs_1/file-b", "vs_10/file-a", "vs_2/file-b"}},
		{"vs_3", nil},
	}
	for _, c := range cases {
		got, bodies := listIDs(t, s, kbstore.KindStoreFile, c.prefix)
		if !slices.Equal(got, c.want) {
			t.Errorf("List(prefix %q) = %q, want %q", c.prefix, got, c.want)
			continue
		}
		for i, id := range got {
			if !jsonEqual(t, bodies[i], fmt.Appendf(nil, `{"id":%q}`, id)) {
				t.Errorf("List(prefix %q) gave %s for %q", c.prefix, bodies[i], id)
			}
		}
	}
	if got, _ := listIDs(t, s, "kind-never-written", ""); len(got) != 0 {
		t.Errorf("List of a kind never written = %q, want none", got)
	}
}

func testListStopsOnError(t *testing.T, s kbstore.Store) {
	for i := range 5 {
		must(t, s.Put(ctx(t), kbstore.KindFile, fmt.Sprintf("file-%d", i), []byte(`{}`)), "Put")
	}
	stop := errors.New("enough")
	var seen []string
	err := s.List(ctx(t), kbstore.KindFile, "", func(id string, _ []byte) error {
		seen = append(seen, id)
		if len(seen) == 2 {
			return fmt.Errorf("listing: %w", stop)
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("List returned %v, want the error fn returned", err)
	}
	if !slices.Equal(seen, []string{"file-0", "file-1"}) {
		t.Fatalf("List called fn with %q after its error, want [file-0 file-1]", seen)
	}
}

// testListMayCallTheStore deletes and writes records from List's fn, as
// a sweep of expired files does: no deadlock, every record seen once.
func testListMayCallTheStore(t *testing.T, s kbstore.Store) {
	for i := range 10 {
		must(t, s.Put(ctx(t), kbstore.KindFile, fmt.Sprintf("file-%02d", i), []byte(`{"n":1}`)), "Put")
	}
	var seen []string
	err := s.List(ctx(t), kbstore.KindFile, "", func(id string, _ []byte) error {
		seen = append(seen, id)
		if err := s.Delete(ctx(t), kbstore.KindFile, id); err != nil {
			return err
		}
		return s.Put(ctx(t), kbstore.KindBatch, id, []byte(`{"moved":true}`))
	})
	must(t, err, "List calling Delete and Put")
	if len(seen) != 10 {
		t.Fatalf("List saw %d records, want 10: %q", len(seen), seen)
	}
	if ids, _ := listIDs(t, s, kbstore.KindFile, ""); len(ids) != 0 {
		t.Fatalf("records left after deleting each from List: %q", ids)
	}
	if ids, _ := listIDs(t, s, kbstore.KindBatch, ""); len(ids) != 10 {
		t.Fatalf("List(batch) = %d records, want 10", len(ids))
	}
}

// testListMany lists more records than a store reads at once.
func testListMany(t *testing.T, s kbstore.Store) {
	const n = 1200
	for i := range n {
		must(t, s.Put(ctx(t), kbstore.KindStoreFile, fmt.Sprintf("vs_1/file-%05d", i), fmt.Appendf(nil, `{"i":%d}`, i)), "Put")
	}
	ids, bodies := listIDs(t, s, kbstore.KindStoreFile, "vs_1/")
	if len(ids) != n {
		t.Fatalf("List gave %d records, want %d", len(ids), n)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("vs_1/file-%05d", i); id != want || !jsonEqual(t, bodies[i], fmt.Appendf(nil, `{"i":%d}`, i)) {
			t.Fatalf("record %d = %q %s, want %q", i, id, bodies[i], want)
		}
	}
}
