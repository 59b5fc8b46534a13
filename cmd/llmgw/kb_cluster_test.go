package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore/pgstore/pgtest"
)

// kbCluster is three gateways (nodes a, b and c: each its own process,
// data directory and ports) whose knowledge bases share one PostgreSQL
// database, and nothing else: no llm cluster over Redis.
type kbCluster struct {
	t                *testing.T
	db               string // the database's dsn
	stopPG, restart  func()
	a, b, c          *gateway
	ca, cb, cc       openai.Client
	nodeA            string // a's name in ingestion leases
	started, settled time.Time
}

// startKBCluster starts PostgreSQL and the three nodes, with models as
// the llm app's catalog (sim-embed the embedder) and leases of 3s.
func startKBCluster(t *testing.T, models string) *kbCluster {
	t.Helper()
	dsn, stop, restart := pgtest.Start(t)
	k := &kbCluster{t: t, db: pgtest.Database(t, dsn), stopPG: stop, restart: restart, started: time.Now()}
	kb := fmt.Sprintf("\t\tllm_kb {\n\t\t\tpostgres %s\n\t\t\tembedder sim-embed\n\t\t\tingest_lease 3s\n\t\t}\n", k.db)
	k.a = startGatewayBefore(t, models, kb)
	k.b = startGatewayBefore(t, models, kb)
	k.c = startGatewayBefore(t, models, kb)
	k.ca, k.cb, k.cc = k.a.client(), k.b.client(), k.c.client()
	k.nodeA = kbNodeID(k.a)
	t.Logf("PostgreSQL and three nodes started in %v", time.Since(k.started).Round(time.Millisecond))
	return k
}

// kbNodeID is the name a node's llm_kb takes in ingestion leases: the
// host and a hash of its data directory (modules/llmkb/service.go).
func kbNodeID(g *gateway) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(filepath.Join(g.dir, "data", "caddy")))
	return host + "-" + hex.EncodeToString(sum[:4])
}

// query runs sql on the knowledge bases' database and returns the rows'
// first column as strings.
func (k *kbCluster) query(sql string, args ...any) []string {
	k.t.Helper()
	conn, err := pgx.Connect(bg, k.db)
	if err != nil {
		k.t.Fatalf("connecting to the knowledge bases' database: %v", err)
	}
	defer conn.Close(bg)
	rows, _ := conn.Query(bg, sql, args...)
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var v any
		err := r.Scan(&v)
		return fmt.Sprint(v), err
	})
	if err != nil {
		k.t.Fatalf("%s: %v", sql, err)
	}
	return out
}

// kbFound reports whether a search of store for q through c has a
// passage of the file with id among its results.
func kbFound(t *testing.T, c openai.Client, store, q, id string) bool {
	t.Helper()
	_, res := kbSearch(t, c, store, q, nil)
	return slices.ContainsFunc(res, func(r openai.VectorStoreSearchResponse) bool { return r.FileID == id })
}

// TestKnowledgeBaseCluster uses one knowledge base through three nodes
// that share it through PostgreSQL alone: files uploaded and a store
// made through a, polled through b, searched through c at once (c's
// index follows the others' changes by LISTEN/NOTIFY), the file's bytes
// read through c; a file deleted through c is gone from searches through
// a and b within seconds, and its bytes and chunks from PostgreSQL; the
// store deleted through b is a 404 through a.
func TestKnowledgeBaseCluster(t *testing.T) {
	k := startKBCluster(t, kbModels)
	travel := kbUpload(t, k.ca, "travel-policy.md", nil)
	security := kbUpload(t, k.ca, "security.html", nil)
	onboarding := kbUpload(t, k.ca, "onboarding.txt", nil)
	vs, err := k.ca.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("handbook"),
		FileIDs: []string{travel.ID, security.ID, onboarding.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if got := kbWaitStore(t, k.cb, vs.ID); got.FileCounts.Completed != 3 {
		t.Fatalf("through b, the store's files: %+v; want 3 completed", got.FileCounts)
	}
	for _, tc := range []struct{ q, file, text string }{
		{"how much may I spend on a hotel room in Munich?", "travel-policy.md", "180"},
		{"my laptop was stolen, what do I do", "security.html", "extension 4400"},
		{"where do I get my badge on day one", "onboarding.txt", "reception"},
	} {
		names, res := kbSearch(t, k.cc, vs.ID, tc.q, nil)
		if len(res) == 0 || names[0] != tc.file || !strings.Contains(res[0].Content[0].Text, tc.text) {
			t.Errorf("through c, %q: got %v (first passage %q), want %s first with %q", tc.q, names, firstText(res), tc.file, tc.text)
		}
	}
	kbCheckContent(t, k.cc, travel.ID, "travel-policy.md")

	if _, err := k.cc.Files.Delete(bg, travel.ID); err != nil {
		t.Fatal(err)
	}
	q := "how much may I spend on a hotel room in Munich?"
	for name, c := range map[string]openai.Client{"a": k.ca, "b": k.cb, "c": k.cc} {
		waitFor(t, 3*time.Second, "the deleted file to leave the searches through "+name, func() bool {
			return !kbFound(t, c, vs.ID, q, travel.ID)
		})
	}
	if n := k.query(`SELECT count(*) FROM llmgw_kb_blobs WHERE id = $1`, travel.ID); n[0] != "0" {
		t.Errorf("the deleted file's bytes are still in PostgreSQL: %s parts", n[0])
	}
	if n := k.query(`SELECT count(*) FROM llmgw_kb_chunks WHERE file = $1`, travel.ID); n[0] != "0" {
		t.Errorf("the deleted file's chunks are still in PostgreSQL: %s", n[0])
	}
	if n := k.query(`SELECT count(*) FROM llmgw_kb_blobs WHERE id = $1`, security.ID); n[0] == "0" {
		t.Errorf("another file's bytes went with the deleted one")
	}
	if !kbFound(t, k.ca, vs.ID, "my laptop was stolen, what do I do", security.ID) {
		t.Errorf("through a, the files left are no longer found")
	}

	if _, err := k.cb.VectorStores.Delete(bg, vs.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := k.ca.VectorStores.Get(bg, vs.ID); apiStatus(err) != 404 {
		t.Errorf("through a, the store deleted through b: %v; want a 404", err)
	}
	if _, err := k.ca.VectorStores.Search(bg, vs.ID, openai.VectorStoreSearchParams{
		Query: openai.VectorStoreSearchParamsQueryUnion{OfString: openai.String("laptop")}}); apiStatus(err) != 404 {
		t.Errorf("through a, searching the store deleted through b: %v; want a 404", err)
	}
	if n := k.query(`SELECT count(*) FROM llmgw_kb_chunks WHERE store = $1`, vs.ID); n[0] != "0" {
		t.Errorf("the deleted store's chunks are still in PostgreSQL: %s", n[0])
	}
}

// kbCheckContent reads a file's bytes through a node other than the one
// it was uploaded through: the same bytes as in testdata.
func kbCheckContent(t *testing.T, c openai.Client, id, name string) {
	t.Helper()
	resp, err := c.Files.Content(bg, id)
	if err != nil {
		t.Fatalf("reading the bytes of %s through another node: %v", name, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	want, _ := os.ReadFile(filepath.Join("testdata", "kb", name))
	if !bytes.Equal(got, want) {
		t.Errorf("the bytes of %s through another node: %d bytes, want the %d uploaded", name, len(got), len(want))
	}
}

// TestKnowledgeBaseClusterStoreRestart stops PostgreSQL under a cluster:
// searches through b answer a 503 in OpenAI's shape that says the store
// is unreachable, within seconds; once PostgreSQL is back, a store made
// through a is found through c (c's watch connected again).
func TestKnowledgeBaseClusterStoreRestart(t *testing.T) {
	k := startKBCluster(t, kbModels)
	security := kbUpload(t, k.ca, "security.html", nil)
	vs, err := k.ca.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("before"), FileIDs: []string{security.ID}})
	if err != nil {
		t.Fatal(err)
	}
	kbWaitStore(t, k.cb, vs.ID)
	q := "my laptop was stolen, what do I do"
	if !kbFound(t, k.cb, vs.ID, q, security.ID) {
		t.Fatal("through b, nothing found before the restart")
	}

	k.stopPG()
	kbCheckStoreDown(t, k.b, vs.ID, q)
	k.restart()

	travel := kbUpload(t, k.ca, "travel-policy.md", nil)
	after, err := k.ca.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("after"), FileIDs: []string{travel.ID}})
	if err != nil {
		t.Fatalf("making a store through a once PostgreSQL is back: %v", err)
	}
	if got := kbWaitStore(t, k.ca, after.ID); got.FileCounts.Completed != 1 {
		t.Fatalf("the store made after the restart: %+v", got.FileCounts)
	}
	waitFor(t, 15*time.Second, "c to find the file of the store made through a after the restart", func() bool {
		return kbFound(t, k.cc, after.ID, "how much may I spend on a hotel room in Munich?", travel.ID)
	})
	if !kbFound(t, k.cb, vs.ID, q, security.ID) {
		t.Error("through b, the store made before the restart is no longer found")
	}
}

// kbCheckStoreDown searches through g with PostgreSQL stopped: a 503
// with Retry-After in OpenAI's error shape naming the store and what to
// check, never the password, within 15 s.
func kbCheckStoreDown(t *testing.T, g *gateway, store, q string) {
	t.Helper()
	start := time.Now()
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(g.base+"/v1/vector_stores/"+store+"/search", "application/json", strings.NewReader(fmt.Sprintf(`{"query":%q}`, q)))
	if err != nil {
		t.Fatalf("searching with PostgreSQL down: %v (after %v)", err, time.Since(start))
	}
	defer resp.Body.Close()
	took := time.Since(start)
	body, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("searching with PostgreSQL down: %d %s; want a 503 in OpenAI's error shape", resp.StatusCode, body)
	}
	msg := e.Error.Message
	if e.Error.Type != "server_error" || e.Error.Code != "kb_store_unavailable" || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(msg, "PostgreSQL at 127.0.0.1:") || !strings.Contains(msg, "check that PostgreSQL runs") || strings.Contains(msg, pgtest.Password) {
		t.Errorf("searching with PostgreSQL down: %s (Retry-After %q); want the store named as unreachable, what to check, no password", body, resp.Header.Get("Retry-After"))
	}
	if took > 15*time.Second {
		t.Errorf("searching with PostgreSQL down took %v; want the 503 within 15 s", took)
	}
	t.Logf("with PostgreSQL down, a search answered %d in %v: %s", resp.StatusCode, took.Round(time.Millisecond), msg)
}

// kbSlowModels are kbModels with an embedder that takes 150 ms a call,
// so that an import is caught half done.
const kbSlowModels = `
		model sim-chat {
			engine sim
			option max_tokens 12
		}
		model sim-embed {
			engine sim
			option embedding_dims 256
			option embedding_delay 150ms
		}`

// TestKnowledgeBaseNodeKilled imports 300 documents through a in one
// batch and kills a (SIGKILL) once some are done and some in progress:
// b and c take over what a held when its leases run out, every file ends
// completed (none failed, none lost), each with as many chunks in
// PostgreSQL as its content has, and a document a was ingesting when it
// died is found through b.
func TestKnowledgeBaseNodeKilled(t *testing.T) {
	k := startKBCluster(t, kbSlowModels)
	docs := kbDocs(300)
	ids := kbUploadReports(t, k.ca, docs)
	vs, err := k.ca.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("project reports")})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := k.ca.VectorStores.FileBatches.New(bg, vs.ID, openai.VectorStoreFileBatchNewParams{FileIDs: ids,
		ChunkingStrategy: openai.FileChunkingStrategyParamOfStatic(openai.StaticFileChunkingStrategyParam{MaxChunkSizeTokens: 100, ChunkOverlapTokens: 20})})
	if err != nil {
		t.Fatal(err)
	}
	held := k.killMidway(vs.ID, batch.ID)
	killed := time.Now()
	t.Logf("a killed holding %d files: %v", len(held), held)

	got := k.waitBatch(vs.ID, batch.ID)
	t.Logf("the batch ended %v after a was killed", time.Since(killed).Round(time.Millisecond))
	if fc := got.FileCounts; fc.Completed != int64(len(docs)) || fc.Total != int64(len(docs)) || fc.Failed != 0 {
		t.Fatalf("the batch after a was killed: %s %+v; want all %d completed", got.Status, fc, len(docs))
	}
	k.checkChunks(vs.ID, ids)
	for _, id := range held {
		i := slices.Index(ids, id)
		q := "What is the status of project " + kbCodename(i) + "?"
		for name, c := range map[string]openai.Client{"b": k.cb, "c": k.cc} {
			if names, res := kbSearch(t, c, vs.ID, q, nil); len(res) == 0 || res[0].FileID != id {
				t.Errorf("through %s, %q: %v; want %s (in progress on a when it was killed) first", name, q, names, docs[i].name)
			}
		}
	}
	t.Logf("the whole test took %v", time.Since(k.started).Round(time.Millisecond))
}

// killMidway waits until the batch has files done and files in progress,
// a holding some, kills a and returns the files a held.
func (k *kbCluster) killMidway(store, batch string) []string {
	t := k.t
	t.Helper()
	var fc openai.VectorStoreFileBatchFileCounts
	waitFor(t, 60*time.Second, "the batch to be partly done with files in progress on a", func() bool {
		b, err := k.ca.VectorStores.FileBatches.Get(bg, store, batch)
		if err != nil || b.FileCounts.Completed < 20 || b.FileCounts.InProgress < 50 {
			return false
		}
		fc = b.FileCounts
		return len(k.heldBy(k.nodeA)) > 0
	})
	_ = k.a.cmd.Process.Kill()
	<-k.a.exited
	t.Logf("a killed with %d files completed and %d in progress", fc.Completed, fc.InProgress)
	held := k.heldBy(k.nodeA)
	if len(held) == 0 {
		t.Fatalf("a held no file in progress when it was killed (as %s)", k.nodeA)
	}
	return held
}

// waitBatch waits through b until the batch is no longer in progress.
func (k *kbCluster) waitBatch(store, batch string) *openai.VectorStoreFileBatch {
	k.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := k.cb.VectorStores.FileBatches.Get(bg, store, batch)
		if err == nil && got.Status != openai.VectorStoreFileBatchStatusInProgress {
			return got
		}
		if time.Now().After(deadline) {
			counts := fmt.Sprint(err)
			if got != nil {
				counts = got.FileCounts.RawJSON()
			}
			k.t.Fatalf("through b, the batch is still in progress after 90 s: %s; files held by a, killed: %v", counts, k.heldBy(k.nodeA))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// heldBy is the files in progress that node holds.
func (k *kbCluster) heldBy(node string) []string {
	return k.query(`SELECT body->>'file_id' FROM llmgw_kb_records
		WHERE kind = 'store_file' AND body->>'status' = 'in_progress' AND body->>'worker' = $1`, node)
}

// checkChunks compares, for each file, the chunks PostgreSQL holds with
// the store file's chunks as its content gives them: no duplicates left
// by two nodes ingesting one file, none missing.
func (k *kbCluster) checkChunks(store string, ids []string) {
	t := k.t
	t.Helper()
	rows := k.query(`SELECT file || ' ' || count(*) FROM llmgw_kb_chunks WHERE store = $1 GROUP BY file`, store)
	inDB := map[string]string{}
	for _, r := range rows {
		f, n, _ := strings.Cut(r, " ")
		inDB[f] = n
	}
	if len(inDB) != len(ids) {
		t.Errorf("chunks of %d files in PostgreSQL, want %d", len(inDB), len(ids))
	}
	bad := 0
	for _, id := range ids {
		page, err := k.cb.VectorStores.Files.Content(bg, store, id)
		if err != nil {
			t.Fatalf("the content of %s: %v", id, err)
		}
		if want := fmt.Sprint(len(page.Data)); inDB[id] != want || want == "0" {
			bad++
			if bad <= 5 {
				t.Errorf("%s: %s chunks in PostgreSQL, %s in its content", id, inDB[id], want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d files whose chunks in PostgreSQL are not their content's", bad)
	}
}

// kbUploadReports uploads docs through c, eight at a time, and returns their
// ids in order.
func kbUploadReports(t *testing.T, c openai.Client, docs []kbReport) []string {
	t.Helper()
	ids := make([]string, len(docs))
	errs := make(chan error, len(docs))
	sem := make(chan struct{}, 8)
	for i, d := range docs {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			f, err := c.Files.New(bg, openai.FileNewParams{File: openai.File(strings.NewReader(d.text), d.name, "text/plain"), Purpose: openai.FilePurposeAssistants})
			if err == nil {
				ids[i] = f.ID
			}
			errs <- err
		}()
	}
	for range docs {
		if err := <-errs; err != nil {
			t.Fatalf("uploading: %v", err)
		}
	}
	return ids
}

// kbReport is a generated document.
type kbReport struct{ name, text string }

var (
	kbColours = []string{"Amber", "Cobalt", "Crimson", "Indigo", "Jade", "Onyx", "Saffron", "Silver", "Teal", "Umber",
		"Violet", "Ivory", "Copper", "Scarlet", "Olive"}
	kbAnimals = []string{"Falcon", "Heron", "Lynx", "Otter", "Badger", "Marten", "Osprey", "Kestrel", "Bison", "Raven",
		"Ibex", "Puffin", "Gecko", "Walrus", "Condor", "Viper", "Crane", "Stoat", "Tapir", "Yak"}
	kbTeams   = []string{"payments", "logistics", "data platform", "customer support", "mobile", "security", "finance", "search"}
	kbCities  = []string{"Berlin", "Lisbon", "Warsaw", "Toronto", "Osaka", "Nairobi", "Lyon", "Austin", "Dublin"}
	kbPeople  = []string{"Maria Keller", "Tomasz Nowak", "Aiko Tanaka", "James Okafor", "Lena Fischer", "Rui Costa", "Priya Nair"}
	kbGoals   = []string{"moves invoice reconciliation off the nightly batch job", "replaces the warehouse label printers' driver", "builds the event pipeline for the quarterly revenue dashboard", "cuts the first response time of support tickets", "ships offline mode in the Android app", "rotates every service credential to the new vault", "automates the month-end close for the subsidiaries", "rebuilds the product search ranking"}
	kbRisks   = []string{"the vendor's API is rate limited to 50 requests per second", "two engineers leave in the next quarter", "the legacy database has no staging copy", "legal has not signed off the data retention terms", "the test devices arrive late", "the load tests need a week of the shared cluster"}
	kbMarkets = []string{"Q1", "Q2", "Q3", "Q4"}
)

// kbCodename is the project name of document i, its own among the
// documents.
func kbCodename(i int) string {
	return kbColours[i%len(kbColours)] + " " + kbAnimals[i/len(kbColours)%len(kbAnimals)]
}

// kbDocs makes n status reports of projects (n at most 300), Markdown
// and plain text by turns, of several chunks each.
func kbDocs(n int) []kbReport {
	docs := make([]kbReport, n)
	for i := range docs {
		code := kbCodename(i)
		pick := func(list []string, salt int) string { return list[(i*7+salt*13+i/5)%len(list)] }
		facts := fmt.Sprintf("Project %s %s for the %s team. It is run by %s from the %s office. "+
			"The approved budget for %s is %d thousand euros, of which %d thousand have been spent. ",
			code, pick(kbGoals, 1), pick(kbTeams, 2), pick(kbPeople, 3), pick(kbCities, 4), pick(kbMarkets, 5), 40+i%90, 10+i%35)
		risks := fmt.Sprintf("The main risk is that %s. A second risk is that %s. ", pick(kbRisks, 6), pick(kbRisks, 7))
		next := fmt.Sprintf("Next steps for %s: a review with the %s team on day %d of the month, then a demo to the steering group. "+
			"Questions about %s go to %s.", code, pick(kbTeams, 8), 1+i%28, code, pick(kbPeople, 9))
		slug := strings.ToLower(strings.ReplaceAll(code, " ", "-"))
		if i%2 == 0 {
			docs[i] = kbReport{slug + "-status.md", fmt.Sprintf("# %s status report\n\n## Summary\n\n%s\n\n## Risks\n\n%s\n\n## Next steps\n\n%s\n", code, facts, risks, next)}
		} else {
			docs[i] = kbReport{slug + "-status.txt", fmt.Sprintf("STATUS REPORT: %s\n\n%s\n\n%s\n\n%s\n", strings.ToUpper(code), facts, risks, next)}
		}
	}
	return docs
}
