package storetest

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// chunks makes n chunks of a file in a store, with vectors.
func chunks(store, file string, n int) []kbstore.Chunk {
	var cs []kbstore.Chunk
	for i := range n {
		cs = append(cs, kbstore.Chunk{
			Store: store, File: file, Seq: i, Tokens: 10 + i,
			Text:   fmt.Sprintf("passage %d of %s in %s", i, file, store),
			Vector: []float32{float32(i), 0.5, -1.25},
		})
	}
	return cs
}

// sameChunk reports how got differs from want, "" when it does not:
// vectors are compared bit for bit.
func sameChunk(got, want kbstore.Chunk) string {
	if got.Store != want.Store || got.File != want.File || got.Seq != want.Seq || got.Tokens != want.Tokens {
		return fmt.Sprintf("got %s/%s#%d (%d tokens), want %s/%s#%d (%d tokens)", got.Store, got.File, got.Seq, got.Tokens, want.Store, want.File, want.Seq, want.Tokens)
	}
	if got.Text != want.Text {
		return fmt.Sprintf("text of %s/%s#%d: got %d bytes %.40q, want %d bytes %.40q", got.Store, got.File, got.Seq, len(got.Text), got.Text, len(want.Text), want.Text)
	}
	if len(got.Vector) != len(want.Vector) {
		return fmt.Sprintf("vector of %s/%s#%d: got %d dims, want %d", got.Store, got.File, got.Seq, len(got.Vector), len(want.Vector))
	}
	for i := range got.Vector {
		if math.Float32bits(got.Vector[i]) != math.Float32bits(want.Vector[i]) {
			return fmt.Sprintf("vector of %s/%s#%d [%d]: got %v, want %v", got.Store, got.File, got.Seq, i, got.Vector[i], want.Vector[i])
		}
	}
	return ""
}

// wantChunks fails unless got is want, in order.
func wantChunks(t *testing.T, what string, got, want []kbstore.Chunk) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d chunks, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := sameChunk(got[i], want[i]); d != "" {
			t.Fatalf("%s: chunk %d: %s", what, i, d)
		}
	}
}

// refsOf names cs.
func refsOf(cs []kbstore.Chunk) []kbstore.ChunkRef {
	var refs []kbstore.ChunkRef
	for _, c := range cs {
		refs = append(refs, kbstore.ChunkRef{Store: c.Store, File: c.File, Seq: c.Seq})
	}
	return refs
}

// all reads every chunk through EachChunk, sorted by store, file, seq.
func all(t *testing.T, s kbstore.Store) []kbstore.Chunk {
	t.Helper()
	var cs []kbstore.Chunk
	must(t, s.EachChunk(ctx(t), func(c kbstore.Chunk) error { cs = append(cs, c); return nil }), "EachChunk")
	slices.SortFunc(cs, func(a, b kbstore.Chunk) int {
		return strings.Compare(fmt.Sprintf("%s\x00%s\x00%09d", a.Store, a.File, a.Seq), fmt.Sprintf("%s\x00%s\x00%09d", b.Store, b.File, b.Seq))
	})
	return cs
}

func testPutChunksReplaces(t *testing.T, s kbstore.Store) {
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", chunks("vs_1", "file-1", 3)), "PutChunks")
	wantChunks(t, "after PutChunks", all(t, s), chunks("vs_1", "file-1", 3))
	fewer := chunks("vs_1", "file-1", 2)
	fewer[0].Text = "rewritten"
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", fewer), "PutChunks again")
	wantChunks(t, "after PutChunks replaced 3 chunks by 2", all(t, s), fewer)
	got, err := s.Chunks(ctx(t), []kbstore.ChunkRef{{Store: "vs_1", File: "file-1", Seq: 2}})
	must(t, err, "Chunks")
	if len(got) != 0 {
		t.Fatalf("chunk 2 is still there after PutChunks put 2 chunks: %+v", got)
	}
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", nil), "PutChunks with none")
	wantChunks(t, "after PutChunks with none", all(t, s), nil)
}

func testDeleteChunksOfFile(t *testing.T, s kbstore.Store) {
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", chunks("vs_1", "file-1", 2)), "PutChunks")
	must(t, s.PutChunks(ctx(t), "vs_1", "file-10", chunks("vs_1", "file-10", 2)), "PutChunks")
	must(t, s.PutChunks(ctx(t), "vs_2", "file-1", chunks("vs_2", "file-1", 1)), "PutChunks")
	must(t, s.DeleteChunks(ctx(t), "vs_1", "file-1"), "DeleteChunks")
	want := append(chunks("vs_1", "file-10", 2), chunks("vs_2", "file-1", 1)...)
	wantChunks(t, "after deleting vs_1/file-1", all(t, s), want)
	must(t, s.DeleteChunks(ctx(t), "vs_1", "file-1"), "DeleteChunks of a file without chunks")
}

func testDeleteChunksOfStore(t *testing.T, s kbstore.Store) {
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", chunks("vs_1", "file-1", 2)), "PutChunks")
	must(t, s.PutChunks(ctx(t), "vs_1", "file-2", chunks("vs_1", "file-2", 3)), "PutChunks")
	must(t, s.PutChunks(ctx(t), "vs_10", "file-1", chunks("vs_10", "file-1", 1)), "PutChunks")
	must(t, s.PutChunks(ctx(t), "vs_2", "file-1", chunks("vs_2", "file-1", 1)), "PutChunks")
	must(t, s.DeleteChunks(ctx(t), "vs_1", ""), "DeleteChunks of a store")
	want := append(chunks("vs_10", "file-1", 1), chunks("vs_2", "file-1", 1)...)
	wantChunks(t, "after deleting store vs_1", all(t, s), want)
	must(t, s.DeleteChunks(ctx(t), "vs_1", ""), "DeleteChunks of a store without chunks")
}

func testChunksByRef(t *testing.T, s kbstore.Store) {
	a, b := chunks("vs_1", "file-1", 3), chunks("vs_2", "file-2", 2)
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", a), "PutChunks")
	must(t, s.PutChunks(ctx(t), "vs_2", "file-2", b), "PutChunks")
	refs := []kbstore.ChunkRef{
		{Store: "vs_2", File: "file-2", Seq: 1},
		{Store: "vs_1", File: "file-1", Seq: 7}, // absent
		{Store: "vs_1", File: "file-1", Seq: 0},
		{Store: "vs_9", File: "file-1", Seq: 0}, // absent
		{Store: "vs_1", File: "file-1", Seq: 2},
	}
	got, err := s.Chunks(ctx(t), refs)
	must(t, err, "Chunks")
	wantChunks(t, "Chunks (in the order asked, absent ones left out)", got, []kbstore.Chunk{b[1], a[0], a[2]})
	got, err = s.Chunks(ctx(t), nil)
	must(t, err, "Chunks of none")
	wantChunks(t, "Chunks of none", got, nil)
	many := append(chunks("vs_3", "file-3", 600), a...)
	must(t, s.PutChunks(ctx(t), "vs_3", "file-3", many[:600]), "PutChunks")
	got, err = s.Chunks(ctx(t), refsOf(many))
	must(t, err, "Chunks of 603")
	wantChunks(t, "Chunks of 603", got, many)
}

func testEachChunk(t *testing.T, s kbstore.Store) {
	wantChunks(t, "EachChunk of an empty store", all(t, s), nil)
	var want []kbstore.Chunk
	for _, f := range []string{"file-1", "file-2", "file-3"} {
		cs := chunks("vs_1", f, 400)
		must(t, s.PutChunks(ctx(t), "vs_1", f, cs), "PutChunks")
		want = append(want, cs...)
	}
	wantChunks(t, "EachChunk", all(t, s), want)
}

func testEachChunkStopsOnError(t *testing.T, s kbstore.Store) {
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", chunks("vs_1", "file-1", 5)), "PutChunks")
	stop := errors.New("enough")
	n := 0
	err := s.EachChunk(ctx(t), func(c kbstore.Chunk) error {
		n++
		if n == 2 {
			return fmt.Errorf("indexing: %w", stop)
		}
		// fn may call the store, as an index build that reads records does.
		_, err := s.Get(ctx(t), kbstore.KindStore, c.Store)
		if !errors.Is(err, kbstore.ErrNotFound) {
			return fmt.Errorf("Get from EachChunk's fn: %v", err)
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("EachChunk returned %v, want the error fn returned", err)
	}
	if n != 2 {
		t.Fatalf("EachChunk called fn %d times, want 2 (it stops on fn's error)", n)
	}
}

func testVectorsExact(t *testing.T, s kbstore.Store) {
	odd := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1.17549435e-38, 0.1, 1.0 / 3, -2.5e-20, 123456.789,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
	}
	big := make([]float32, 3072)
	for i := range big {
		big[i] = float32(math.Sin(float64(i))) / float32(i+1)
	}
	cs := []kbstore.Chunk{
		{Store: "vs_1", File: "file-1", Seq: 0, Text: "odd values", Vector: odd},
		{Store: "vs_1", File: "file-1", Seq: 1, Text: "3072 dims", Vector: big},
		{Store: "vs_1", File: "file-1", Seq: 2, Text: "keywords alone, no vector"},
	}
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", cs), "PutChunks")
	got, err := s.Chunks(ctx(t), refsOf(cs))
	must(t, err, "Chunks")
	wantChunks(t, "Chunks", got, cs)
	wantChunks(t, "EachChunk", all(t, s), cs)
}

func testBigTexts(t *testing.T, s kbstore.Store) {
	text := strings.Repeat("A knowledge base holds long passages. ", 1<<20/38+1)[:1<<20]
	cs := []kbstore.Chunk{{Store: "vs_1", File: "file-1", Seq: 0, Text: text, Tokens: 250000}}
	must(t, s.PutChunks(ctx(t), "vs_1", "file-1", cs), "PutChunks of 1 MB")
	got, err := s.Chunks(ctx(t), refsOf(cs))
	must(t, err, "Chunks")
	wantChunks(t, "a 1 MB chunk", got, cs)

	body := fmt.Appendf(nil, `{"id":"file-1","note":%q}`, text)
	must(t, s.Put(ctx(t), kbstore.KindFile, "file-1", body), "Put of a 1 MB record")
	wantBody(t, s, kbstore.KindFile, "file-1", body)
}

func testUnicode(t *testing.T, s kbstore.Store) {
	text := "Ünïcödé: 日本語のテキスト, русский, עברית, emoji 🧠📚, combining e\u0301, \u2028 line sep, tab\tend"
	cs := []kbstore.Chunk{{Store: "vs_ü", File: "file-日本", Seq: 0, Text: text}}
	must(t, s.PutChunks(ctx(t), "vs_ü", "file-日本", cs), "PutChunks")
	got, err := s.Chunks(ctx(t), refsOf(cs))
	must(t, err, "Chunks")
	wantChunks(t, "a chunk in many scripts", got, cs)

	body := fmt.Appendf(nil, `{"filename":%q,"metadata":{"clé":"値 🧠"}}`, text)
	must(t, s.Put(ctx(t), kbstore.KindFile, "file-日本", body), "Put")
	wantBody(t, s, kbstore.KindFile, "file-日本", body)
	ids, _ := listIDs(t, s, kbstore.KindFile, "file-日")
	if !slices.Equal(ids, []string{"file-日本"}) {
		t.Fatalf("List(prefix file-日) = %q, want [file-日本]", ids)
	}
}

// testCancelledContext checks that an ended context fails a write and
// leaves nothing written.
func testCancelledContext(t *testing.T, s kbstore.Store) {
	c, cancel := ctxCancelled(t)
	defer cancel()
	if err := s.Put(c, kbstore.KindFile, "file-1", []byte(`{}`)); err == nil {
		t.Fatal("Put with an ended context succeeded, want an error")
	}
	if err := s.PutChunks(c, "vs_1", "file-1", chunks("vs_1", "file-1", 1)); err == nil {
		t.Fatal("PutChunks with an ended context succeeded, want an error")
	}
	wantAbsent(t, s, kbstore.KindFile, "file-1")
	wantChunks(t, "after writes with an ended context", all(t, s), nil)
}
