package llmkb

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

func TestRoutes(t *testing.T) {
	for _, tc := range []struct {
		path   string
		ok     bool
		rest   string
		method string
		want   string
	}{
		{"/v1/files", true, "files", "POST", "files"},
		{"/v1/files/", true, "files", "GET", "files"},
		{"/openai/v1/vector_stores/vs_1/files/file-2/content", true, "vector_stores/vs_1/files/file-2/content", "GET", "vector_stores/{}/files/{}/content"},
		{"/v1/vector_stores/vs_1/file_batches/b/cancel", true, "vector_stores/vs_1/file_batches/b/cancel", "POST", "vector_stores/{}/file_batches/{}/cancel"},
		{"/v1/chat/completions", false, "", "", ""},
		{"/v1/filesystem", false, "", "", ""},
	} {
		rest, ok := apiPath(tc.path)
		if ok != tc.ok || rest != tc.rest {
			t.Errorf("apiPath(%q) = %q %v", tc.path, rest, ok)
			continue
		}
		if !ok {
			continue
		}
		found := ""
		for _, rt := range routes {
			if _, m := match(rt.pattern, strings.Split(rest, "/")); m && rt.method == tc.method {
				found = rt.pattern
			}
		}
		if found != tc.want {
			t.Errorf("%s %s routes to %q, want %q", tc.method, tc.path, found, tc.want)
		}
	}
	if _, ok := match("files/{}", []string{"files", ""}); ok {
		t.Errorf("an empty id matches")
	}
}

func TestPaginate(t *testing.T) {
	type it struct {
		at int64
		id string
	}
	items := []it{{3, "c"}, {1, "a"}, {2, "b"}, {2, "bb"}, {5, "e"}}
	key := func(i it) (int64, string) { return i.at, i.id }
	p := paginate(append([]it(nil), items...), paging{limit: 2, desc: true}, key)
	if len(p.Data) != 2 || p.Data[0].id != "e" || p.Data[1].id != "c" || !p.HasMore || *p.FirstID != "e" || *p.LastID != "c" {
		t.Fatalf("first page: %+v", p)
	}
	p = paginate(append([]it(nil), items...), paging{limit: 2, desc: true, after: "c"}, key)
	if len(p.Data) != 2 || p.Data[0].id != "bb" || p.Data[1].id != "b" || !p.HasMore {
		t.Fatalf("after c: %+v", p)
	}
	p = paginate(append([]it(nil), items...), paging{limit: 10, after: "b"}, key)
	if len(p.Data) != 3 || p.Data[0].id != "bb" || p.HasMore {
		t.Fatalf("ascending after b: %+v", p)
	}
	p = paginate([]it{}, paging{limit: 10}, key)
	if p.Data == nil || p.FirstID != nil {
		t.Fatalf("an empty page: %+v", p)
	}
}

func TestParseChunking(t *testing.T) {
	for _, tc := range []struct {
		in, err string
		want    kbstore.Chunking
	}{
		{``, "", kbstore.Chunking{Type: "auto", MaxTokens: 800, OverlapTokens: 400}},
		{`{"type":"auto"}`, "", kbstore.Chunking{Type: "auto", MaxTokens: 800, OverlapTokens: 400}},
		{`{"type":"static","static":{"max_chunk_size_tokens":300,"chunk_overlap_tokens":50}}`, "", kbstore.Chunking{Type: "static", MaxTokens: 300, OverlapTokens: 50}},
		{`{"type":"static","static":{"max_chunk_size_tokens":300,"chunk_overlap_tokens":200}}`, "chunking_strategy.static", kbstore.Chunking{}},
		{`{"type":"static","static":{"max_chunk_size_tokens":50,"chunk_overlap_tokens":0}}`, "chunking_strategy.static", kbstore.Chunking{}},
		{`{"type":"static"}`, "needs", kbstore.Chunking{}},
		{`{"type":"semantic"}`, `"auto" or "static"`, kbstore.Chunking{}},
		{`"auto"`, "chunking_strategy", kbstore.Chunking{}},
	} {
		got, e := parseChunking(json.RawMessage(tc.in), "chunking_strategy")
		switch {
		case tc.err == "" && (e != nil || got != tc.want):
			t.Errorf("%s: got %+v, %v", tc.in, got, e)
		case tc.err != "" && (e == nil || !strings.Contains(e.Message+e.Param, tc.err)):
			t.Errorf("%s: want an error with %q, got %v", tc.in, tc.err, e)
		}
	}
}

func TestWhoSeesAStore(t *testing.T) {
	alpha := caller{project: "acme/research/alpha", team: "acme/research", org: "acme"}
	beta := caller{project: "acme/research/beta", team: "acme/research", org: "acme"}
	gamma := caller{project: "acme/sales/gamma", team: "acme/sales", org: "acme"}
	other := caller{project: "acmex/research/alpha", team: "acmex/research", org: "acmex"}
	own := &kbstore.VectorStore{Owner: alpha.project}
	team := &kbstore.VectorStore{Owner: "acme/research", Shared: true, Creator: alpha.project}
	org := &kbstore.VectorStore{Owner: "acme", Shared: true, Creator: gamma.project}
	for _, tc := range []struct {
		c             caller
		vs            *kbstore.VectorStore
		sees, changes bool
	}{
		{alpha, own, true, true}, {beta, own, false, false}, {caller{}, own, false, false},
		{alpha, team, true, true}, {beta, team, true, false}, {gamma, team, false, false},
		{beta, org, true, false}, {gamma, org, true, true}, {other, org, false, false}, {other, team, false, false},
		{caller{}, &kbstore.VectorStore{}, true, true},
	} {
		if got := tc.c.sees(tc.vs); got != tc.sees {
			t.Errorf("%q sees %q (shared %v): %v", tc.c.project, tc.vs.Owner, tc.vs.Shared, got)
		}
		if got := tc.c.changes(tc.vs); got != tc.changes {
			t.Errorf("%q changes %q: %v", tc.c.project, tc.vs.Owner, got)
		}
	}
}

func TestQueue(t *testing.T) {
	q := newQueue()
	q.push("a")
	q.push("b")
	q.push("a") // waiting already
	if q.len() != 2 {
		t.Fatalf("len %d", q.len())
	}
	var wg sync.WaitGroup
	got := make(chan string, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if id, ok := q.pop(); ok {
				got <- id
			}
		}()
	}
	q.push("c")
	for range 3 {
		<-got
	}
	q.close()
	wg.Wait()
	if _, ok := q.pop(); ok {
		t.Fatalf("a closed queue gave an id")
	}
}

func TestInject(t *testing.T) {
	hits := []passage{{filename: "a.md", text: "Alpha is 1."}, {filename: "b.md", text: "Beta is 2."}}
	for _, tc := range []struct{ messages, first string }{
		{`[{"role":"user","content":"what is alpha?"}]`, `"content":"Answer using`},
		{`[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"what is alpha?"}]}]`, `Be brief.\n\nAnswer using`},
		{`[{"role":"system","content":[{"type":"text","text":"Be brief."}]},{"role":"user","content":"what is alpha?"}]`, `{"type":"text","text":"Be brief."},{"text":"Answer using`},
	} {
		req, err := openai.Parse(openai.ChatCompletions, []byte(`{"model":"m","messages":`+tc.messages+`}`))
		if err != nil {
			t.Fatal(err)
		}
		var msgs []json.RawMessage
		if err := json.Unmarshal(req.Messages, &msgs); err != nil {
			t.Fatal(err)
		}
		if q := lastUserText(msgs); q != "what is alpha?" {
			t.Errorf("the question of %s: %q", tc.messages, q)
		}
		if err := inject(req, msgs, hits, []string{"vs_1@2"}); err != nil {
			t.Fatal(err)
		}
		body, _ := req.UpstreamBody("")
		var got struct{ Messages []message }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		s := string(body)
		if !strings.Contains(s, tc.first) || !strings.Contains(s, `[1] a.md\nAlpha is 1.`) || !strings.Contains(s, `[2] b.md`) || !strings.Contains(s, "vs_1@2") {
			t.Errorf("%s: injected %s", tc.messages, s)
		}
		if req.MessageCount != len(got.Messages) {
			t.Errorf("MessageCount %d, messages %d", req.MessageCount, len(got.Messages))
		}
	}
}

// TestPacing checks when an import's embedding batch may go: while more
// than half the embedder's slots are free, any number; busier, one at a
// time while two slots are free; else none until slots free up.
func TestPacing(t *testing.T) {
	var free, total atomic.Int32
	s := &service{}
	s.deps.Store(&deps{slots: func(string) (int, int) { return int(free.Load()), int(total.Load()) }})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	goes := func() bool {
		c, stop := context.WithTimeout(ctx, 60*time.Millisecond)
		defer stop()
		done, err := s.waitForSlots(c, "m")
		if err == nil {
			t.Cleanup(done)
		}
		return err == nil
	}
	free.Store(3)
	total.Store(4)
	if !goes() || !goes() {
		t.Fatalf("3 of 4 slots free: batches must go")
	}
	free.Store(2)
	s.embedding.Store(0)
	if !goes() {
		t.Fatalf("2 of 4 free and no batch in flight: one must go")
	}
	if goes() {
		t.Fatalf("2 of 4 free and a batch in flight: another went")
	}
	s.embedding.Store(0)
	free.Store(1)
	if goes() {
		t.Fatalf("1 of 4 free: a batch went")
	}
	total.Store(0)
	if !goes() {
		t.Fatalf("no ready replica: the batch must go (its call starts one)")
	}
}
