package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// The knowledge bases' load measurements run only with LLMGW_KB_BENCH=1
// (they take minutes and print numbers; they assert only that the import
// completes):
//
//	LLMGW_KB_BENCH=1 go test -count=1 -v -run 'TestKnowledgeBaseImportThroughput|TestKnowledgeBaseImportChatTTFT' ./cmd/llmgw
//
// LLMGW_KB_BENCH_FILES sets the number of files imported (default 300
// for the throughput, 1000 for the chat measurement).
func kbBench(t *testing.T, defaultFiles int) int {
	t.Helper()
	if os.Getenv("LLMGW_KB_BENCH") != "1" {
		t.Skip("a load measurement: set LLMGW_KB_BENCH=1 to run it")
	}
	if raceBuild {
		t.Skip("a load measurement: run it without -race")
	}
	n := defaultFiles
	if s := os.Getenv("LLMGW_KB_BENCH_FILES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("LLMGW_KB_BENCH_FILES=%q: give a number of files", s)
		}
		n = v
	}
	return n
}

// kbDoc is a file to import.
type kbDoc struct {
	name string
	data []byte
}

// kbBenchDocs is n documents: the retrieval corpus (Markdown, text, HTML,
// PDF and DOCX of a made-up company) repeated, each text copy with a line
// of its own so that no two are alike (PDF and DOCX copies keep their
// bytes under another name).
func kbBenchDocs(t *testing.T, n int) []kbDoc {
	t.Helper()
	dir := filepath.Join("..", "..", "modules", "llmkb", "kbeval", "testdata", "corpus")
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var docs []kbDoc
	for i := 0; len(docs) < n; i++ {
		e := ents[i%len(ents)]
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		copyNo := i / len(ents)
		line := fmt.Sprintf("Copy %d of this document, kept in archive box %d.", copyNo, 1000+copyNo)
		switch filepath.Ext(e.Name()) {
		case ".md", ".txt":
			data = append([]byte(line+"\n\n"), data...)
		case ".html":
			data = bytes.Replace(data, []byte("</body>"), []byte("<p>"+line+"</p></body>"), 1)
		}
		docs = append(docs, kbDoc{fmt.Sprintf("c%04d-%s", copyNo, e.Name()), data})
	}
	return docs
}

// kbUploadAll uploads docs with 4 clients at once and returns their ids
// and bytes.
func kbUploadAll(t *testing.T, c openai.Client, docs []kbDoc) ([]string, int64) {
	t.Helper()
	ids := make([]string, len(docs))
	var size int64
	var wg sync.WaitGroup
	next := make(chan int)
	for range 4 {
		wg.Go(func() {
			for i := range next {
				ids[i] = kbUpload(t, c, docs[i].name, docs[i].data).ID
			}
		})
	}
	for i, d := range docs {
		next <- i
		size += int64(len(d.data))
	}
	close(next)
	wg.Wait()
	return ids, size
}

// kbImportStats is how an import of files through a file batch went.
type kbImportStats struct {
	files  int
	bytes  int64
	chunks float64
	took   time.Duration
}

func (s kbImportStats) String() string {
	sec := s.took.Seconds()
	return fmt.Sprintf("%d files, %.1f MB, %.0f chunks in %.1fs: %.1f files/s, %.2f MB/s, %.0f chunks/s",
		s.files, float64(s.bytes)/1e6, s.chunks, sec, float64(s.files)/sec, float64(s.bytes)/1e6/sec, s.chunks/sec)
}

// kbStartImport creates a store and batches of ids (500 each, the most a
// batch takes); done waits for the batches to end and returns how long
// they took from the first one's creation.
func kbStartImport(t *testing.T, c openai.Client, ids []string) (done func(timeout time.Duration) time.Duration) {
	t.Helper()
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("bench")})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var batches []string
	for part := range slices.Chunk(ids, 500) {
		b, err := c.VectorStores.FileBatches.New(bg, vs.ID, openai.VectorStoreFileBatchNewParams{FileIDs: part})
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, b.ID)
	}
	return func(timeout time.Duration) time.Duration {
		deadline := time.Now().Add(timeout)
		for _, id := range batches {
			var b *openai.VectorStoreFileBatch
			for time.Now().Before(deadline) {
				b, err = c.VectorStores.FileBatches.Get(bg, vs.ID, id)
				if err == nil && b.Status != openai.VectorStoreFileBatchStatusInProgress {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if b == nil || b.FileCounts.Failed+b.FileCounts.Cancelled+b.FileCounts.InProgress > 0 {
				t.Fatalf("the import after %s: batch %+v, want all its files completed", time.Since(start), b)
			}
		}
		return time.Since(start)
	}
}

// kbChunks is the number of chunks in the gateway's index.
func kbChunks(t *testing.T, g *gateway) float64 {
	v, _ := value(scrape(t, g), "llmgw_kb_chunks", nil)
	return v
}

// TestKnowledgeBaseImportThroughput imports the same files through the
// real binary (/v1/files, then one file batch) into a store without an
// embedder (keywords alone) and with the sim engine as the embedder
// (instant, and 50ms a call: each call is a batch of 32 chunks, paced by
// the embedder's free slots), and logs files/s, MB/s and chunks/s from
// the batch's creation to its end (uploads not counted).
func TestKnowledgeBaseImportThroughput(t *testing.T) {
	n := kbBench(t, 300)
	docs := kbBenchDocs(t, n)
	for _, mode := range []struct{ name, models, kb string }{
		{"keywords", "\t\tmodel sim-chat {\n\t\t\tengine sim\n\t\t}", "\t\tllm_kb\n"},
		{"sim embedder", kbBenchEmbedder("0s"), "\t\tllm_kb {\n\t\t\tembedder sim-embed\n\t\t}\n"},
		{"sim embedder, 50ms a call", kbBenchEmbedder("50ms"), "\t\tllm_kb {\n\t\t\tembedder sim-embed\n\t\t}\n"},
	} {
		t.Run(mode.name, func(t *testing.T) {
			g := startGatewayBefore(t, mode.models, mode.kb)
			g.waitReady()
			c := g.client()
			upStart := time.Now()
			ids, size := kbUploadAll(t, c, docs)
			up := time.Since(upStart)
			took := kbStartImport(t, c, ids)(10 * time.Minute)
			st := kbImportStats{files: n, bytes: size, chunks: kbChunks(t, g), took: took}
			t.Logf("%s: uploads %.1f files/s; import %s", mode.name, float64(n)/up.Seconds(), st)
		})
	}
}

// kbBenchEmbedder is a sim embedder of one replica with 4 slots.
func kbBenchEmbedder(delay string) string {
	return fmt.Sprintf(`
		model sim-embed {
			engine sim
			option embedding_delay %s
			min 1
			max 1
			target_concurrency 4
		}`, delay)
}

// TestKnowledgeBaseImportChatTTFT serves one sim model as both the chat
// model and the embedder (ttft 50ms, 200 tokens/s, 50ms an embedding
// call, one replica with 4 slots) and measures the time to first token
// of 4 and of 2 clients streaming answers back to back, without an import
// and while 1,000 files are imported into a store embedded by that model,
// then of 4 again once the import has ended (on shared cores the tail
// moves between windows by itself). It logs how many chunks the import
// indexed during each window: the pacing holds it back while chat keeps
// half of the slots busy.
func TestKnowledgeBaseImportChatTTFT(t *testing.T) {
	n := kbBench(t, 1000)
	models := `
		model sim {
			engine sim
			option ttft 50ms
			option tokens_per_second 200
			option max_tokens 20
			option embedding_delay 50ms
			min 1
			max 1
			target_concurrency 4
		}`
	g := startGatewayBefore(t, models, "\t\tllm_kb {\n\t\t\tembedder sim\n\t\t}\n")
	g.waitReady()
	c := g.client()
	ids, size := kbUploadAll(t, c, kbBenchDocs(t, n))
	window := 20 * time.Second
	t.Logf("4 clients, chat alone: %s", kbChatLoad(t, g, 4, window))
	t.Logf("2 clients, chat alone: %s", kbChatLoad(t, g, 2, window))
	done := kbStartImport(t, c, ids)
	busy, starts := kbChatLoadAt(t, g, 4, window)
	chunks := kbChunks(t, g)
	t.Logf("4 clients, chat during the import: %s; %.0f chunks indexed meanwhile; answers over 80ms by second: %v", busy, chunks, slowBy(starts, busy, 80*time.Millisecond))
	busy = kbChatLoad(t, g, 2, window)
	t.Logf("2 clients, chat during the import: %s; %.0f chunks indexed meanwhile", busy, kbChunks(t, g)-chunks)
	took := done(20 * time.Minute)
	t.Logf("the import (under chat load for its first %s): %s", 2*window, kbImportStats{files: n, bytes: size, chunks: kbChunks(t, g), took: took})
	// Again without an import: how far the machine itself moved meanwhile.
	t.Logf("4 clients, chat alone after the import: %s", kbChatLoad(t, g, 4, window))
}

// ttfts are times to first token.
type ttfts []time.Duration

// slowBy counts the answers slower than limit by second of the window.
func slowBy(starts []time.Duration, d ttfts, limit time.Duration) []int {
	var out []int
	for i, s := range starts {
		sec := int(s / time.Second)
		for len(out) <= sec {
			out = append(out, 0)
		}
		if d[i] > limit {
			out[sec]++
		}
	}
	return out
}

func (d ttfts) String() string {
	if len(d) == 0 {
		return "no answers"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	p := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}
	return fmt.Sprintf("%d streams, TTFT p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms", len(s), p(0.5), p(0.95), p(0.99), p(1))
}

// kbChatLoad runs clients streaming chat answers back to back for d and
// returns their times to the first content chunk.
func kbChatLoad(t *testing.T, g *gateway, clients int, d time.Duration) ttfts {
	all, _ := kbChatLoadAt(t, g, clients, d)
	return all
}

// kbChatLoadAt is kbChatLoad with when each stream started, from the
// window's start.
func kbChatLoadAt(t *testing.T, g *gateway, clients int, d time.Duration) (ttfts, []time.Duration) {
	t.Helper()
	var mu sync.Mutex
	var all ttfts
	var starts []time.Duration
	begin := time.Now()
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i := range clients {
		wg.Go(func() {
			for k := 0; time.Now().Before(end); k++ {
				at := time.Since(begin)
				ttft, err := kbStreamTTFT(g, fmt.Sprintf("client %d asks question %d about the travel policy", i, k))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, ttft)
				starts = append(starts, at)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return all, starts
}

// kbStreamTTFT streams one chat answer and returns the time to its first
// content chunk (the whole answer is read).
func kbStreamTTFT(g *gateway, q string) (time.Duration, error) {
	body := fmt.Sprintf(`{"model":"sim","stream":true,"messages":[{"role":"user","content":%q}]}`, q)
	start := time.Now()
	resp, err := http.Post(g.base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("a chat stream: status %d", resp.StatusCode)
	}
	var ttft time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if ttft == 0 && strings.Contains(sc.Text(), `"content":"`) && !strings.Contains(sc.Text(), `"content":""`) {
			ttft = time.Since(start)
		}
	}
	if ttft == 0 {
		return 0, fmt.Errorf("a chat stream without content")
	}
	return ttft, sc.Err()
}
