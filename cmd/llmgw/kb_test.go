package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// kbModels are a chat model and an embedder, both the sim engine.
const kbModels = `
		model sim-chat {
			engine sim
			option max_tokens 12
		}
		model sim-embed {
			engine sim
			option embedding_dims 256
		}`

// kbUpload uploads a file of testdata/kb (or given bytes) with the client.
func kbUpload(t *testing.T, c openai.Client, name string, data []byte) *openai.FileObject {
	t.Helper()
	if data == nil {
		var err error
		if data, err = os.ReadFile(filepath.Join("testdata", "kb", name)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := c.Files.New(bg, openai.FileNewParams{File: openai.File(bytes.NewReader(data), name, "application/octet-stream"), Purpose: openai.FilePurposeAssistants})
	if err != nil {
		t.Fatalf("uploading %s: %v", name, err)
	}
	if f.Filename != name || f.Bytes != int64(len(data)) || !strings.HasPrefix(f.ID, "file-") {
		t.Fatalf("uploading %s: the file object is %+v", name, f)
	}
	return f
}

// kbWaitStore waits until none of a store's files is in progress.
func kbWaitStore(t *testing.T, c openai.Client, id string) *openai.VectorStore {
	t.Helper()
	var vs *openai.VectorStore
	waitFor(t, 60*time.Second, "the store's files to be ingested", func() bool {
		var err error
		vs, err = c.VectorStores.Get(bg, id)
		return err == nil && vs.FileCounts.InProgress == 0
	})
	return vs
}

// kbSearch searches a store and returns the file names of the results,
// best first, and the results.
func kbSearch(t *testing.T, c openai.Client, store, q string, mod func(*openai.VectorStoreSearchParams)) ([]string, []openai.VectorStoreSearchResponse) {
	t.Helper()
	p := openai.VectorStoreSearchParams{Query: openai.VectorStoreSearchParamsQueryUnion{OfString: openai.String(q)}}
	if mod != nil {
		mod(&p)
	}
	page, err := c.VectorStores.Search(bg, store, p)
	if err != nil {
		t.Fatalf("searching %q: %v", q, err)
	}
	var names []string
	for _, r := range page.Data {
		names = append(names, r.Filename)
	}
	return names, page.Data
}

// apiStatus is the HTTP status of an API error, 0 for none.
func apiStatus(err error) int {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// TestKnowledgeBases runs OpenAI's Files and Vector Stores APIs and the
// Responses API's file_search tool with the official Go client against
// llmgw: uploads in every format the project reads, a store made with
// files, a file added and a batch uploaded and polled, searches (English
// and German questions in other words than the documents', attribute
// filters, a score threshold), a file that cannot be read, answers with
// citations through Responses and through chat with the knowledge
// header, and deletion removing the passages everywhere.
func TestKnowledgeBases(t *testing.T) {
	g := startGatewayBefore(t, kbModels, "\t\tllm_kb {\n\t\t\tembedder sim-embed\n\t\t}\n")
	g.waitReady()
	c := g.client()

	travel := kbUpload(t, c, "travel-policy.md", nil)
	security := kbUpload(t, c, "security.html", nil)
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("handbook"), FileIDs: []string{travel.ID, security.ID},
		Metadata: map[string]string{"owner": "people-team"}})
	if err != nil {
		t.Fatal(err)
	}
	if vs.Name != "handbook" || vs.Metadata["owner"] != "people-team" || !strings.HasPrefix(vs.ID, "vs_") {
		t.Fatalf("the new store: %+v", vs)
	}
	got := kbWaitStore(t, c, vs.ID)
	if got.FileCounts.Completed != 2 || got.Status != openai.VectorStoreStatusCompleted || got.UsageBytes == 0 {
		t.Fatalf("the store after ingestion: %+v", got.FileCounts)
	}

	onboarding, err := c.VectorStores.Files.UploadAndPoll(bg, vs.ID, openai.FileNewParams{
		File: openai.File(mustRead(t, "onboarding.txt"), "onboarding.txt", "text/plain"), Purpose: openai.FilePurposeAssistants}, 100)
	if err != nil || onboarding.Status != openai.VectorStoreFileStatusCompleted {
		t.Fatalf("UploadAndPoll: %v %+v", err, onboarding)
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	batch, err := c.VectorStores.FileBatches.UploadAndPoll(bg, vs.ID, []openai.FileNewParams{
		{File: openai.File(mustRead(t, "reisekosten.txt"), "reisekosten.txt", "text/plain"), Purpose: openai.FilePurposeAssistants},
		{File: openai.File(bytes.NewReader(png), "org-chart.png", "image/png"), Purpose: openai.FilePurposeAssistants},
	}, nil, 100)
	if err != nil || batch.Status != openai.VectorStoreFileBatchStatusCompleted || batch.FileCounts.Completed != 1 || batch.FileCounts.Failed != 1 {
		t.Fatalf("the batch: %v %+v", err, batch)
	}
	failed, err := c.VectorStores.FileBatches.ListFiles(bg, vs.ID, batch.ID, openai.VectorStoreFileBatchListFilesParams{Filter: openai.VectorStoreFileBatchListFilesParamsFilterFailed})
	if err != nil || len(failed.Data) != 1 || failed.Data[0].LastError.Code != "unsupported_file" || !strings.Contains(failed.Data[0].LastError.Message, "PNG") {
		t.Fatalf("the picture's failure: %v %+v", err, failed)
	}

	t.Run("search", func(t *testing.T) { kbCheckSearch(t, c, vs.ID, security.ID) })
	t.Run("responses", func(t *testing.T) { kbCheckResponses(t, c, vs.ID) })
	t.Run("chat", func(t *testing.T) { kbCheckChat(t, g, vs.ID) })
	t.Run("metrics and log", func(t *testing.T) {
		fams := scrape(t, g)
		if v, _ := value(fams, "llmgw_kb_chunks", nil); v < 4 {
			t.Errorf("llmgw_kb_chunks %v, want the store's chunks", v)
		}
		if v, _ := value(fams, "llmgw_kb_ingested_files_total", map[string]string{"status": "failed"}); v != 1 {
			t.Errorf("llmgw_kb_ingested_files_total{status=failed} %v, want 1 (the picture)", v)
		}
		if fam, ok := fams["llmgw_kb_search_seconds"]; !ok || fam.GetMetric()[0].GetHistogram().GetSampleCount() == 0 {
			t.Errorf("no search counted in llmgw_kb_search_seconds")
		}
		waitFor(t, 5*time.Second, "the access log to name the store searched", func() bool {
			return strings.Contains(g.logs.String(), `"llm_kb":"`+vs.ID+`"`)
		})
	})

	// Deleting a file takes its passages out of every store.
	if _, err := c.Files.Delete(bg, travel.ID); err != nil {
		t.Fatal(err)
	}
	if names, _ := kbSearch(t, c, vs.ID, "hotel nightly limit Munich", nil); strings.Contains(strings.Join(names, ","), "travel-policy.md") {
		t.Errorf("a deleted file is still found: %v", names)
	}
	if _, err := c.Files.Get(bg, travel.ID); apiStatus(err) != 404 {
		t.Errorf("a deleted file: %v", err)
	}
	if _, err := c.VectorStores.Files.Get(bg, vs.ID, travel.ID); apiStatus(err) != 404 {
		t.Errorf("a deleted file in the store: %v", err)
	}
	if _, err := c.VectorStores.Delete(bg, vs.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.VectorStores.Get(bg, vs.ID); apiStatus(err) != 404 {
		t.Errorf("a deleted store: %v", err)
	}
	if _, err := c.VectorStores.Search(bg, vs.ID, openai.VectorStoreSearchParams{Query: openai.VectorStoreSearchParamsQueryUnion{OfString: openai.String("laptop")}}); apiStatus(err) != 404 {
		t.Errorf("searching a deleted store: %v", err)
	}
}

func mustRead(t *testing.T, name string) *bytes.Reader {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kb", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(b)
}

// kbCheckSearch asks the store questions in other words than its
// documents', in English and German, with filters and a threshold.
func kbCheckSearch(t *testing.T, c openai.Client, store, securityID string) {
	for _, tc := range []struct{ q, file, text string }{
		{"how much may I spend on a hotel room in Munich?", "travel-policy.md", "180"},
		{"my laptop was stolen, what do I do", "security.html", "extension 4400"},
		{"minimum password length", "security.html", "14 characters"},
		{"where do I get my badge on day one", "onboarding.txt", "reception"},
		{"Wie hoch ist die Verpflegungspauschale bei Dienstreisen?", "reisekosten.txt", "28 Euro"},
	} {
		names, res := kbSearch(t, c, store, tc.q, nil)
		if len(res) == 0 || names[0] != tc.file || !strings.Contains(res[0].Content[0].Text, tc.text) {
			t.Errorf("%q: got %v (first passage %q), want %s first with %q", tc.q, names, firstText(res), tc.file, tc.text)
		}
		for _, r := range res {
			if r.Score < 0 || r.Score > 1 {
				t.Errorf("%q: a score out of [0, 1]: %v", tc.q, r.Score)
			}
		}
	}
	_, res := kbSearch(t, c, store, "stolen laptop", nil)
	for _, r := range res {
		if strings.Contains(r.Content[0].Text, "Intranet home") || strings.Contains(r.Content[0].Text, "Cookie settings") {
			t.Errorf("the page's navigation or footer is in a passage: %q", r.Content[0].Text)
		}
	}
	if _, err := c.VectorStores.Files.Update(bg, store, securityID, openai.VectorStoreFileUpdateParams{
		Attributes: map[string]openai.VectorStoreFileUpdateParamsAttributeUnion{"department": {OfString: openai.String("it")}}}); err != nil {
		t.Fatal(err)
	}
	names, _ := kbSearch(t, c, store, "what is the policy", func(p *openai.VectorStoreSearchParams) {
		p.Filters = openai.VectorStoreSearchParamsFiltersUnion{OfComparisonFilter: &openai.ComparisonFilterParam{Key: "department",
			Type: openai.ComparisonFilterTypeEq, Value: openai.ComparisonFilterValueUnionParam{OfString: openai.String("it")}}}
	})
	if len(names) == 0 || strings.ReplaceAll(strings.Join(names, ","), "security.html", "") != strings.Repeat(",", len(names)-1) {
		t.Errorf("filter department=it gives other files than security.html: %v", names)
	}
	names, _ = kbSearch(t, c, store, "hotel", func(p *openai.VectorStoreSearchParams) {
		p.MaxNumResults = openai.Int(1)
	})
	if len(names) != 1 {
		t.Errorf("max_num_results 1: %v", names)
	}
	names, _ = kbSearch(t, c, store, "quantum chromodynamics lattice gauge", func(p *openai.VectorStoreSearchParams) {
		p.RankingOptions = openai.VectorStoreSearchParamsRankingOptions{ScoreThreshold: openai.Float(0.5)}
	})
	if len(names) != 0 {
		t.Errorf("a question the documents do not answer, threshold 0.5: %v", names)
	}
}

func firstText(res []openai.VectorStoreSearchResponse) string {
	if len(res) == 0 || len(res[0].Content) == 0 {
		return ""
	}
	return res[0].Content[0].Text
}

// kbCheckResponses asks through the Responses API with file_search.
func kbCheckResponses(t *testing.T, c openai.Client, store string) {
	resp, err := c.Responses.New(bg, responses.ResponseNewParams{
		Model:   "sim-chat",
		Input:   responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the nightly hotel limit in Berlin?")},
		Tools:   []responses.ToolUnionParam{{OfFileSearch: &responses.FileSearchToolParam{VectorStoreIDs: []string{store}}}},
		Include: []responses.ResponseIncludable{responses.ResponseIncludableFileSearchCallResults},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) < 2 || resp.Output[0].Type != "file_search_call" {
		t.Fatalf("the output: %+v", resp.Output)
	}
	call := resp.Output[0].AsFileSearchCall()
	if call.Status != "completed" || len(call.Results) == 0 || call.Results[0].Filename != "travel-policy.md" || !strings.Contains(call.Results[0].Text, "160") {
		t.Errorf("the file_search_call: %+v", call)
	}
	msg := resp.Output[1].AsMessage()
	var cited []string
	for _, part := range msg.Content {
		for _, a := range part.Annotations {
			if a.Type == "file_citation" {
				cited = append(cited, a.Filename)
			}
		}
	}
	if len(cited) == 0 || cited[0] != "travel-policy.md" {
		t.Errorf("the answer's citations: %v (%+v)", cited, msg.Content)
	}
}

// kbCheckChat asks through chat completions with the knowledge header,
// whole and streamed.
func kbCheckChat(t *testing.T, g *gateway, store string) {
	body := `{"model":"sim-chat","messages":[{"role":"user","content":"How long must a password be?"}]}`
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-LLMGW-Knowledge", store)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		Choices []struct {
			Message struct {
				Annotations []struct {
					Type         string `json:"type"`
					FileCitation struct {
						FileID, Filename string
					} `json:"file_citation"`
				} `json:"annotations"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != 200 || len(answer.Choices) == 0 {
		t.Fatalf("chat with knowledge: %d %v", resp.StatusCode, err)
	}
	a := answer.Choices[0].Message.Annotations
	if len(a) == 0 || a[0].Type != "file_citation" || a[0].FileCitation.Filename != "security.html" {
		t.Errorf("the chat answer's citations: %+v", a)
	}
	if resp.Header.Get("X-Llmgw-Kb-Results") == "" {
		t.Errorf("no X-Llmgw-Kb-Results header")
	}
	stream := strings.Replace(body, `"model"`, `"stream":true,"model"`, 1)
	req, _ = http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(stream))
	req.Header.Set("X-LLMGW-Knowledge", store)
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	var sse bytes.Buffer
	_, _ = sse.ReadFrom(resp2.Body)
	if !strings.Contains(sse.String(), `"annotations"`) || !strings.HasSuffix(strings.TrimSpace(sse.String()), "data: [DONE]") {
		t.Errorf("the streamed answer has no citations chunk before [DONE]: %s", sse.String())
	}
}

// TestJSKnowledgeBases runs the official openai client for JavaScript,
// unchanged, against llmgw's knowledge bases (testdata/jsclients/kb.mjs):
// createAndPoll, uploadAndPoll, search with a filter, Responses with
// file_search whole and streamed, chat with the knowledge header. The
// gateway runs the demo config, Caddyfile.example (its key, guardrails,
// cache and sim embedder), on free ports.
func TestJSKnowledgeBases(t *testing.T) {
	work := jsWork(t, "lib.mjs", "kb.mjs")
	docs, err := filepath.Abs(filepath.Join("testdata", "kb"))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLMGW_KB_DOCS", docs)
	t.Setenv("LLMGW_JS_KEY", "sk-llmgw-example-key-change-me")
	g := startExample(t)
	runJSChecks(t, g, work, "kb.mjs")
}

// startExample runs Caddyfile.example with its admin endpoint and site
// on free ports.
func startExample(t *testing.T) *gateway {
	t.Helper()
	raw, err := os.ReadFile("../../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	cfg := strings.Replace(string(raw), "admin localhost:2019", fmt.Sprintf("admin 127.0.0.1:%d", g.admin), 1)
	cfg = strings.Replace(cfg, "\n:8080 {", fmt.Sprintf("\n:%d {", g.http), 1)
	if cfg == string(raw) || !strings.Contains(cfg, fmt.Sprintf(":%d {", g.http)) {
		t.Fatalf("Caddyfile.example no longer has the admin address and site this test moves")
	}
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	g.waitReady()
	return g
}
