package pgstore

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/pgstore/pgtest"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/storetest"
)

// TestBlobsConformance runs the blobs' suite on one server, a database
// per test.
func TestBlobsConformance(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	storetest.RunBlobs(t, func(t *testing.T) kbstore.Blobs { return open(t, pgtest.Database(t, dsn)) })
}

// blobParts is the sizes of the parts of id, in order, as the table
// holds them.
func blobParts(t *testing.T, db, id string) []int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	rows, _ := conn.Query(t.Context(), `SELECT length(data) FROM llmgw_kb_blobs WHERE id = $1 ORDER BY part`, id)
	sizes, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int, len(sizes))
	for i, n := range sizes {
		out[i] = int(n)
	}
	return out
}

// TestBlobsBetweenNodes writes a file's bytes through one node and reads
// them through another: rows of at most 1 MiB; writing again replaces
// every part, deleting removes every part.
func TestBlobsBetweenNodes(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	db := pgtest.Database(t, dsn)
	a, b := open(t, db), open(t, db)
	ctx := t.Context()
	data := bytes.Repeat([]byte("0123456789abcdef"), (5<<20)/2/16) // 2.5 MiB
	if err := a.PutBlob(ctx, "file-1", data); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetBlob(ctx, "file-1"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the other node read %d bytes, %v; want the %d written", len(got), err, len(data))
	}
	if got, want := blobParts(t, db, "file-1"), []int{1 << 20, 1 << 20, 1 << 19}; !slices.Equal(got, want) {
		t.Fatalf("parts of %v bytes, want %v", got, want)
	}
	if err := b.PutBlob(ctx, "file-1", []byte("short")); err != nil {
		t.Fatal(err)
	}
	if got := blobParts(t, db, "file-1"); !slices.Equal(got, []int{5}) {
		t.Fatalf("after writing 5 bytes over 2.5 MiB, parts of %v bytes; want [5]", got)
	}
	if err := a.PutBlob(ctx, "file-1", data); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBlob(ctx, "file-1"); err != nil {
		t.Fatal(err)
	}
	if got := blobParts(t, db, "file-1"); len(got) != 0 {
		t.Fatalf("after DeleteBlob, parts of %v bytes are left", got)
	}
	if _, err := a.GetBlob(ctx, "file-1"); !errors.Is(err, kbstore.ErrNotFound) {
		t.Fatalf("GetBlob after the other node deleted it: %v, want ErrNotFound", err)
	}
}

// TestBlobsMigration opens a database made before the blobs' table
// existed (schema version 1): Open adds it.
func TestBlobsMigration(t *testing.T) {
	dsn, _, _ := pgtest.Start(t)
	db := pgtest.Database(t, dsn)
	open(t, db).Close()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), `DROP TABLE llmgw_kb_blobs; DELETE FROM llmgw_kb_schema WHERE version > 1`); err != nil {
		t.Fatal(err)
	}
	s := open(t, db)
	if err := s.PutBlob(t.Context(), "file-1", []byte("x")); err != nil {
		t.Fatalf("PutBlob on a database of schema 1 opened again: %v", err)
	}
}
