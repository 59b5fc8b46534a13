// Package storetest is the conformance suite of kbstore.Store and
// kbstore.Blobs: every implementation runs it, so that the knowledge
// bases behave the same on one node's embedded store and on a cluster's
// PostgreSQL.
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// Run tests every method of the Store open returns. open returns an
// empty store for each subtest and closes it when the test ends
// (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) kbstore.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s kbstore.Store)
	}{
		{"PutGet", testPutGet},
		{"GetAbsent", testGetAbsent},
		{"KindsApart", testKindsApart},
		{"Delete", testDelete},
		{"ListPrefixAndOrder", testListPrefixAndOrder},
		{"ListStopsOnError", testListStopsOnError},
		{"ListMayCallTheStore", testListMayCallTheStore},
		{"ListMany", testListMany},
		{"UpdateConcurrent", testUpdateConcurrent},
		{"UpdateCreates", testUpdateCreates},
		{"UpdateDeletes", testUpdateDeletes},
		{"UpdateError", testUpdateError},
		{"PutChunksReplaces", testPutChunksReplaces},
		{"DeleteChunksOfFile", testDeleteChunksOfFile},
		{"DeleteChunksOfStore", testDeleteChunksOfStore},
		{"ChunksByRef", testChunksByRef},
		{"EachChunk", testEachChunk},
		{"EachChunkStopsOnError", testEachChunkStopsOnError},
		{"VectorsExact", testVectorsExact},
		{"BigTexts", testBigTexts},
		{"Unicode", testUnicode},
		{"CancelledContext", testCancelledContext},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

// ctx is the context of one test: it ends with the test.
func ctx(t *testing.T) context.Context { return t.Context() }

// must fails the test on err.
func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// jsonEqual reports whether a and b are the same JSON value: a store may
// keep records in a form of its own (PostgreSQL's jsonb orders keys).
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %q: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %q: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// wantBody fails unless the record kind/id holds want.
func wantBody(t *testing.T, s kbstore.Store, kind, id string, want []byte) {
	t.Helper()
	got, err := s.Get(ctx(t), kind, id)
	if err != nil {
		t.Fatalf("Get(%q, %q): %v", kind, id, err)
	}
	if !jsonEqual(t, got, want) {
		t.Fatalf("Get(%q, %q) = %s, want %s", kind, id, got, want)
	}
}

// wantAbsent fails unless Get of kind/id gives ErrNotFound.
func wantAbsent(t *testing.T, s kbstore.Store, kind, id string) {
	t.Helper()
	got, err := s.Get(ctx(t), kind, id)
	if !errors.Is(err, kbstore.ErrNotFound) {
		t.Fatalf("Get(%q, %q) = %s, %v; want an error that is ErrNotFound", kind, id, got, err)
	}
}

// listIDs lists kind/prefix and returns the ids and bodies in order.
func listIDs(t *testing.T, s kbstore.Store, kind, prefix string) ([]string, [][]byte) {
	t.Helper()
	var ids []string
	var bodies [][]byte
	err := s.List(ctx(t), kind, prefix, func(id string, body []byte) error {
		ids = append(ids, id)
		bodies = append(bodies, bytes.Clone(body))
		return nil
	})
	must(t, err, "List")
	return ids, bodies
}

// ctxCancelled is a context already ended.
func ctxCancelled(t *testing.T) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(t.Context())
	cancel()
	return c, cancel
}
