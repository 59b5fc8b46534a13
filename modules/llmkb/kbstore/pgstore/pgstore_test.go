package pgstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/pgstore/pgtest"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/storetest"
)

func open(t *testing.T, dsn string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestConformance runs the suite on one server, a database per test.
func TestConformance(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	storetest.Run(t, func(t *testing.T) kbstore.Store { return open(t, pgtest.Database(t, dsn)) })
}

// changes collects what a Watch reports.
type changes struct {
	mu  sync.Mutex
	got []kbstore.Change
}

func (c *changes) add(ch kbstore.Change) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, ch)
}

// wait waits up to 30 s for want among the changes, and returns the
// changes seen until then.
func (c *changes) wait(t *testing.T, want kbstore.Change) []kbstore.Change {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		got := append([]kbstore.Change{}, c.got...)
		c.mu.Unlock()
		for _, g := range got {
			if g == want {
				return got
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no change %+v within 30 s; got %+v", want, got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// watch runs s.Watch until the test ends.
func watch(t *testing.T, s *Store) *changes {
	c := &changes{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Watch(ctx, c.add); err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// TestWatchBetweenNodes has two stores on one database, as two nodes:
// each sees the other's changes, never its own.
func TestWatchBetweenNodes(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	db := pgtest.Database(t, dsn)
	a, b := open(t, db), open(t, db)
	seenByA, seenByB := watch(t, a), watch(t, b)
	ctx := t.Context()
	time.Sleep(200 * time.Millisecond) // both LISTENing
	steps := []struct {
		write func() error
		want  kbstore.Change
	}{
		{func() error { return a.Put(ctx, kbstore.KindFile, "file-1", []byte(`{}`)) }, kbstore.Change{Op: "record", Kind: kbstore.KindFile, ID: "file-1"}},
		{func() error {
			return a.Update(ctx, kbstore.KindStore, "vs_1", func([]byte) ([]byte, error) { return []byte(`{"version":1}`), nil })
		}, kbstore.Change{Op: "record", Kind: kbstore.KindStore, ID: "vs_1"}},
		{func() error {
			return a.PutChunks(ctx, "vs_1", "file-1", []kbstore.Chunk{{Store: "vs_1", File: "file-1", Text: "x"}})
		}, kbstore.Change{Op: "chunks", Store: "vs_1", File: "file-1"}},
		{func() error { return a.DeleteChunks(ctx, "vs_1", "file-1") }, kbstore.Change{Op: "delete_file", Store: "vs_1", File: "file-1"}},
		{func() error { return a.DeleteChunks(ctx, "vs_1", "") }, kbstore.Change{Op: "delete_store", Store: "vs_1"}},
		{func() error { return a.Delete(ctx, kbstore.KindFile, "file-1") }, kbstore.Change{Op: "record", Kind: kbstore.KindFile, ID: "file-1"}},
	}
	for _, st := range steps {
		if err := st.write(); err != nil {
			t.Fatal(err)
		}
		seenByB.wait(t, st.want)
	}
	if err := b.Put(ctx, kbstore.KindBatch, "batch-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	got := seenByA.wait(t, kbstore.Change{Op: "record", Kind: kbstore.KindBatch, ID: "batch-1"})
	if len(got) != 1 {
		t.Fatalf("a saw %+v, want only b's change (not its own)", got)
	}
	if got := seenByB.wait(t, steps[0].want); len(got) != len(steps) {
		t.Fatalf("b saw %d changes, want %d (not its own): %+v", len(got), len(steps), got)
	}
}

// TestWatchAcrossRestart restarts PostgreSQL under a Watch: the Watch
// connects again, says "resync", and reports the changes made after.
func TestWatchAcrossRestart(t *testing.T) {
	dsn, _, restart := pgtest.Start(t)
	db := pgtest.Database(t, dsn)
	a, b := open(t, db), open(t, db)
	var errs []string
	var mu sync.Mutex
	b.WatchError = func(err error) { mu.Lock(); errs = append(errs, err.Error()); mu.Unlock() }
	seen := watch(t, b)
	time.Sleep(200 * time.Millisecond)
	restart()
	seen.wait(t, kbstore.Change{Op: "resync"})
	if err := a.Put(t.Context(), kbstore.KindFile, "file-after", []byte(`{}`)); err != nil {
		t.Fatalf("Put after the restart: %v", err)
	}
	seen.wait(t, kbstore.Change{Op: "record", Kind: kbstore.KindFile, ID: "file-after"})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) == 0 {
		t.Fatal("WatchError was not told of the lost connection")
	}
	for _, e := range errs {
		if strings.Contains(e, pgtest.Password) {
			t.Fatalf("a watch error shows the password: %s", e)
		}
	}
}

// TestWriteDuringOutage writes while PostgreSQL is down: an error that
// says where and what to check, within the context's time, not a hang;
// once PostgreSQL is back, writes succeed again.
func TestWriteDuringOutage(t *testing.T) {
	dsn, stop, restart := pgtest.Start(t)
	s := open(t, pgtest.Database(t, dsn))
	if err := s.Put(t.Context(), kbstore.KindFile, "file-1", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	err := s.Put(ctx, kbstore.KindFile, "file-2", []byte(`{}`))
	if err == nil {
		t.Fatal("Put succeeded with PostgreSQL down")
	}
	if took := time.Since(start); took > 6*time.Second {
		t.Fatalf("Put took %v with a 5 s context", took)
	}
	if msg := err.Error(); !strings.Contains(msg, "in PostgreSQL at 127.0.0.1:") || strings.Contains(msg, pgtest.Password) {
		t.Fatalf("Put's error %q: want where it failed, never the password", msg)
	}
	if _, err := s.Get(ctx, kbstore.KindFile, "file-1"); err == nil {
		t.Fatal("Get succeeded with PostgreSQL down")
	}
	restart()
	if err := s.Put(t.Context(), kbstore.KindFile, "file-2", []byte(`{}`)); err != nil {
		t.Fatalf("Put once PostgreSQL is back: %v", err)
	}
}

// TestOpenErrors opens with a wrong password and with nothing listening:
// errors say where and what to check, and never show the password.
func TestOpenErrors(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	wrong := strings.Replace(dsn, pgtest.Password, "not-"+pgtest.Password, 1)
	cases := map[string]string{
		"wrong password": wrong,
		"nothing there":  "postgres://postgres:" + pgtest.Password + "@127.0.0.1:1/postgres?sslmode=disable",
		"malformed":      "postgres://postgres:" + pgtest.Password + "@127.0.0.1:notaport/postgres",
		"key=value":      "host=127.0.0.1 port=1 user=postgres password=" + pgtest.Password + " sslmode=disable",
	}
	for name, dsn := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := Open(ctx, dsn)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			if strings.Contains(msg, pgtest.Password) || !strings.Contains(msg, "dsn in llm_kb's store") {
				t.Fatalf("Open's error %q: want what to check, never the password", msg)
			}
		})
	}
}
