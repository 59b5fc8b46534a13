package mirror

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// PruneCache removes the versions keep does not want and stray files,
// never a version a replica holds; a dry run removes nothing.
func TestPruneCache(t *testing.T) {
	d := mustDir(t, "d")
	cache := t.TempDir()
	m, err := New(Config{Stores: []Store{d}, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	src := t.TempDir()
	var vs []string
	for i := range 3 {
		p := writeRandom(t, src, "w"+string(rune('a'+i))+".gguf", 1000+int64(i), uint64(i))
		res, err := m.Add(ctx, AddOptions{Model: "m", Source: p})
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, res.Manifest.Version)
	}
	var held *Fetched
	for i, v := range vs {
		f, err := m.Fetch(ctx, "m", v)
		if err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			held = f // a replica holds the third
			continue
		}
		f.Release()
	}
	os.WriteFile(filepath.Join(cache, "stray.bin"), make([]byte, 300), 0o644)
	os.WriteFile(filepath.Join(cache, "m", "notes.txt"), []byte("hi"), 0o644)
	keep := func(model, version string) bool { return version == vs[0] }
	paths := func(es []CacheEntry) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.Path)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"m/" + vs[1], "m/notes.txt", "stray.bin"}
	slices.Sort(want)
	dry, err := m.PruneCache(keep, true)
	if err != nil || !slices.Equal(paths(dry), want) {
		t.Fatalf("dry run: %v %v; want %v", paths(dry), err, want)
	}
	if _, err := os.Stat(filepath.Join(cache, "stray.bin")); err != nil {
		t.Fatalf("a dry run removed a file: %v", err)
	}
	got, err := m.PruneCache(keep, false)
	if err != nil || !slices.Equal(paths(got), want) {
		t.Fatalf("prune: %v %v; want %v", paths(got), err, want)
	}
	for _, e := range got {
		if e.Path == "stray.bin" && (e.Size != 300 || e.Files != 1) {
			t.Errorf("stray.bin: %+v", e)
		}
	}
	left, _ := m.CacheEntries()
	if l := paths(left); !slices.Equal(l, []string{"m/" + vs[0], "m/" + vs[2]}) {
		t.Fatalf("left: %v", l)
	}
	held.Release()
	if got, _ := m.PruneCache(keep, false); !slices.Equal(paths(got), []string{"m/" + vs[2]}) {
		t.Fatalf("after the release: %v", paths(got))
	}
}
