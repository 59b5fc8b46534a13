package kbeval

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/llmgw/llmgw/modules/llmkb/docread"
	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/boltstore"
)

// BenchmarkIngest runs the whole ingestion path of a file but HTTP and
// the embedder's network call, on the evaluation corpus: docread.Read,
// kbindex.Chunk (auto), the index's Add and boltstore's PutChunks (a
// committed bbolt transaction per file, as the handler does). One op is
// the whole corpus; MB/s counts the files' bytes. "sim-vectors" adds the
// sim engine's Embed in process (64 dims), so it shows the cost of
// carrying vectors through, not of an embedding model; "keywords-no-store"
// leaves bbolt out, to tell the CPU's part from the disk's (each file's
// transaction is fsynced).
//
//	go test -run '^$' -bench Ingest ./modules/llmkb/kbeval
func BenchmarkIngest(b *testing.B) {
	files := readCorpusFiles(b)
	var size int64
	for _, f := range files {
		size += int64(len(f.data))
	}
	for _, mode := range []struct {
		name  string
		embed embedder
		store bool
	}{{"keywords", nil, true}, {"sim-vectors", simEmbed, true}, {"keywords-no-store", nil, false}} {
		b.Run(mode.name, func(b *testing.B) {
			var st *boltstore.Store
			if mode.store {
				var err error
				if st, err = boltstore.Open(filepath.Join(b.TempDir(), "kb.db")); err != nil {
					b.Fatal(err)
				}
				defer st.Close()
			}
			ix := kbindex.New()
			b.SetBytes(size)
			chunks := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				store := fmt.Sprintf("vs_%d", i)
				for _, f := range files {
					chunks += ingestOne(b, st, ix, store, f, mode.embed)
				}
			}
			b.ReportMetric(float64(chunks)/b.Elapsed().Seconds(), "chunks/s")
			b.ReportMetric(float64(b.N*len(files))/b.Elapsed().Seconds(), "files/s")
		})
	}
}

// corpusFile is one file of the corpus, unread.
type corpusFile struct {
	name string
	data []byte
}

func readCorpusFiles(tb testing.TB) []corpusFile {
	tb.Helper()
	dir := filepath.Join("testdata", "corpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var files []corpusFile
	for _, e := range ents {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			tb.Fatal(err)
		}
		files = append(files, corpusFile{e.Name(), data})
	}
	return files
}

// ingestOne reads, chunks, stores (unless st is nil) and indexes one
// file, as the handler's ingest and complete do; it returns the number of
// chunks.
func ingestOne(b *testing.B, st *boltstore.Store, ix *kbindex.Index, store string, f corpusFile, embed embedder) int {
	doc, err := docread.Read(f.name, f.data)
	if err != nil {
		b.Fatalf("reading %s: %v", f.name, err)
	}
	pieces := kbindex.Chunk(doc, kbindex.ChunkOptions{})
	chunks := make([]kbstore.Chunk, len(pieces))
	entries := make([]kbindex.Entry, len(pieces))
	for i, p := range pieces {
		chunks[i] = kbstore.Chunk{Store: store, File: f.name, Seq: i, Text: p.Text, Tokens: p.Tokens}
		if embed != nil {
			chunks[i].Vector = embed(p.Text)
		}
		entries[i] = kbindex.Entry{Ref: kbstore.ChunkRef{Store: store, File: f.name, Seq: i}, Text: p.Text, Vector: chunks[i].Vector}
	}
	if st != nil {
		if err := st.PutChunks(context.Background(), store, f.name, chunks); err != nil {
			b.Fatal(err)
		}
	}
	ix.Add(entries)
	return len(chunks)
}
