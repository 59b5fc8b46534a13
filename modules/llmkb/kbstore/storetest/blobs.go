package storetest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// RunBlobs tests the Blobs open returns: an empty one for each subtest.
func RunBlobs(t *testing.T, open func(t *testing.T) kbstore.Blobs) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b kbstore.Blobs)
	}{
		{"PutGet", testBlobPutGet},
		{"Absent", testBlobAbsent},
		{"Delete", testBlobDelete},
		{"Big", testBlobBig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open(t)) })
	}
}

func wantBlob(t *testing.T, b kbstore.Blobs, id string, want []byte) {
	t.Helper()
	got, err := b.GetBlob(ctx(t), id)
	if err != nil {
		t.Fatalf("GetBlob(%q): %v", id, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("GetBlob(%q) = %d bytes %.40q, want %d bytes %.40q", id, len(got), got, len(want), want)
	}
}

func testBlobPutGet(t *testing.T, b kbstore.Blobs) {
	must(t, b.PutBlob(ctx(t), "file-1", []byte("hello\x00world")), "PutBlob")
	wantBlob(t, b, "file-1", []byte("hello\x00world"))
	must(t, b.PutBlob(ctx(t), "file-1", []byte("again")), "PutBlob over a blob")
	wantBlob(t, b, "file-1", []byte("again"))
	must(t, b.PutBlob(ctx(t), "file-2", nil), "PutBlob of no bytes")
	wantBlob(t, b, "file-2", nil)
}

func testBlobAbsent(t *testing.T, b kbstore.Blobs) {
	got, err := b.GetBlob(ctx(t), "file-none")
	if !errors.Is(err, kbstore.ErrNotFound) {
		t.Fatalf("GetBlob of an absent blob = %q, %v; want an error that is ErrNotFound", got, err)
	}
}

func testBlobDelete(t *testing.T, b kbstore.Blobs) {
	must(t, b.PutBlob(ctx(t), "file-1", []byte("one")), "PutBlob")
	must(t, b.PutBlob(ctx(t), "file-10", []byte("ten")), "PutBlob")
	must(t, b.DeleteBlob(ctx(t), "file-1"), "DeleteBlob")
	if _, err := b.GetBlob(ctx(t), "file-1"); !errors.Is(err, kbstore.ErrNotFound) {
		t.Fatalf("GetBlob after DeleteBlob: %v, want ErrNotFound", err)
	}
	wantBlob(t, b, "file-10", []byte("ten"))
	must(t, b.DeleteBlob(ctx(t), "file-1"), "DeleteBlob of an absent blob")
}

func testBlobBig(t *testing.T, b kbstore.Blobs) {
	data := bytes.Repeat([]byte{0, 1, 2, 0xff, 'x'}, 8<<20/5)
	must(t, b.PutBlob(ctx(t), "file-big", data), "PutBlob of 8 MB")
	wantBlob(t, b, "file-big", data)
}
