package boltstore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/storetest"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "llm", "kb", "kb.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) kbstore.Store { return open(t) })
}

// TestReopen keeps records and chunks across a restart of the gateway.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kb.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := s.Put(ctx, kbstore.KindFile, "file-1", []byte(`{"id":"file-1"}`)); err != nil {
		t.Fatal(err)
	}
	chunk := kbstore.Chunk{Store: "vs_1", File: "file-1", Text: "kept", Vector: []float32{1, 2}}
	if err := s.PutChunks(ctx, "vs_1", "file-1", []kbstore.Chunk{chunk}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open2(t, path)
	if body, err := s.Get(ctx, kbstore.KindFile, "file-1"); err != nil || string(body) != `{"id":"file-1"}` {
		t.Fatalf("Get after reopening = %s, %v", body, err)
	}
	got, err := s.Chunks(ctx, []kbstore.ChunkRef{{Store: "vs_1", File: "file-1"}})
	if err != nil || len(got) != 1 || got[0].Text != "kept" || len(got[0].Vector) != 2 {
		t.Fatalf("Chunks after reopening = %+v, %v", got, err)
	}
}

func open2(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestInUse fails the second opening of one file with a message that
// says why and what to do, instead of waiting for ever.
func TestInUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kb.db")
	open2(t, path)
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), "in use by another process") {
		t.Fatalf("second Open = %v, want an error saying the file is in use", err)
	}
}

// TestWatchReturns returns at once: one node has no one to watch.
func TestWatchReturns(t *testing.T) {
	if err := open(t).Watch(t.Context(), func(kbstore.Change) { t.Error("a change on one node") }); err != nil {
		t.Fatal(err)
	}
}

// TestNamesWithNUL refuses a store or file name that would break the
// chunks' key prefixes.
func TestNamesWithNUL(t *testing.T) {
	s := open(t)
	if err := s.PutChunks(t.Context(), "vs_1\x00x", "file-1", nil); err == nil {
		t.Fatal("PutChunks accepted a store name with a NUL byte")
	}
	if err := s.DeleteChunks(t.Context(), "", ""); err == nil {
		t.Fatal("DeleteChunks accepted no store: it would delete every chunk")
	}
}
