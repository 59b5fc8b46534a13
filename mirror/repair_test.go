package mirror

import (
	"os"
	"slices"
	"testing"
)

// corrupt flips a byte of a local file.
func corrupt(t *testing.T, p string, at int64) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// A fetch that finds a store's copy corrupt takes another store's and
// puts the good bytes back into the bad store; a copy in the node cache
// that went bad is found by Recheck and fetched again.
func TestFetchReplacesBadCopies(t *testing.T) {
	d1, d2 := mustDir(t, "d1"), mustDir(t, "d2")
	ctx := ctxT(t)
	src := writeRandom(t, t.TempDir(), "m.gguf", 3<<20, 11)
	if _, err := newMirror(t, d1, d2).Add(ctx, AddOptions{Model: "m", Version: "v1", Source: src}); err != nil {
		t.Fatal(err)
	}
	onD1, err := d1.path(fileKey("m", "v1", "m.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt(t, onD1, 1<<20)

	// A fresh node tries d1 first, finds the mismatch, takes d2's copy
	// and repairs d1.
	m := newMirror(t, d1, d2)
	fe, err := m.Fetch(ctx, "m", "v1")
	if err != nil {
		t.Fatal(err)
	}
	fe.Release()
	if got := sumFile(t, fe.Path("m.gguf")); got != sumFile(t, src) {
		t.Fatal("the fetched copy does not match the source")
	}
	if got := sumFile(t, onD1); got != sumFile(t, src) {
		t.Error("store d1 still holds the corrupt copy after a fetch found it")
	}

	// The node cache's copy goes bad: Recheck finds it and the next
	// Fetch brings a good one.
	corrupt(t, fe.Path("m.gguf"), 5)
	bad, err := m.Recheck(ctx, "m", "v1")
	if err != nil || !slices.Equal(bad, []string{"m.gguf"}) {
		t.Fatalf("recheck: got %v %v, want m.gguf found bad", bad, err)
	}
	fe, err = m.Fetch(ctx, "m", "v1")
	if err != nil {
		t.Fatal(err)
	}
	fe.Release()
	if got := sumFile(t, fe.Path("m.gguf")); got != sumFile(t, src) {
		t.Fatal("the node cache's copy was not replaced")
	}
	if bad, err := m.Recheck(ctx, "m", "v1"); err != nil || len(bad) != 0 {
		t.Fatalf("recheck of a good copy: %v %v", bad, err)
	}
}
