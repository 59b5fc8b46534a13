package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgw/llmgw/mirror/s3test"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// updatesRegistry is a stand-in for the model registry's API (the real
// one cannot be reached from the test machines): org/repo's revision main
// points at commit, whose one file model.gguf is kept in LFS with its
// sha256 listed. down makes every request fail; lie lists a wrong sum.
type updatesRegistry struct {
	mu     sync.Mutex
	commit string
	files  map[string][]byte // commit → model.gguf
	down   bool
	lie    bool
}

func (r *updatesRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	p := req.URL.Path
	switch {
	case p == "/api/models/org/repo/revision/main":
		json.NewEncoder(w).Encode(map[string]any{"id": "org/repo", "sha": r.commit})
	case strings.HasPrefix(p, "/api/models/org/repo/tree/"):
		b, ok := r.files[strings.TrimPrefix(p, "/api/models/org/repo/tree/")]
		if !ok {
			http.NotFound(w, req)
			return
		}
		sum := updatesSum(b)
		if r.lie {
			sum = updatesSum([]byte("not these bytes"))
		}
		json.NewEncoder(w).Encode([]map[string]any{{"type": "file", "path": "model.gguf", "size": len(b), "oid": "gitoid",
			"lfs": map[string]any{"oid": sum, "size": len(b), "pointerSize": 130}}})
	case strings.HasPrefix(p, "/org/repo/resolve/"):
		c, path, _ := strings.Cut(strings.TrimPrefix(p, "/org/repo/resolve/"), "/")
		b, ok := r.files[c]
		if !ok || path != "model.gguf" {
			http.NotFound(w, req)
			return
		}
		http.ServeContent(w, req, path, time.Time{}, bytes.NewReader(b))
	default:
		http.NotFound(w, req)
	}
}

// moveTo makes main point at a new commit holding content.
func (r *updatesRegistry) moveTo(commit, content string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commit = commit
	r.files[commit] = []byte(content)
}

func (r *updatesRegistry) set(down, lie bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down, r.lie = down, lie
}

func updatesSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// updatesWeights is the sum of the weights the replica that answered was
// given, as the sim engine reports it.
func updatesWeights(t *testing.T, g *gateway) string {
	t.Helper()
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"d","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, body)
	}
	return r.Header.Get("X-Sim-Weights")
}

func updatesGet(t *testing.T, g *gateway, query string) llmapi.ModelUpdates {
	t.Helper()
	code, body := adminDo(t, g, "GET", "/llm/models/d/updates"+query, "")
	var u llmapi.ModelUpdates
	if code != 200 || json.Unmarshal(body, &u) != nil {
		t.Fatalf("GET updates: %d %s", code, body)
	}
	return u
}

// updatesUnderStreams runs an update or rollback under 32 streams and a
// steady flow of short requests, and checks that none was cut.
func updatesUnderStreams(t *testing.T, g *gateway, action string) llmapi.VersionRollout {
	t.Helper()
	results := openStreams(t, g, "d", 32, drainTokens)
	stop := make(chan struct{})
	wait := liveLoad(t, g, stop)
	code, body := adminDo(t, g, "POST", "/llm/models/d/"+action, "")
	if code != 200 {
		close(stop)
		wait()
		t.Fatalf("%s: %d %s", action, code, body)
	}
	var out llmapi.VersionRollout
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	checkStreams(t, action, results, 32, drainTokens)
	close(stop)
	okN, failed := wait()
	if failed != 0 || okN == 0 {
		t.Errorf("requests during the %s: %d ok, %d failed", action, okN, failed)
	}
	t.Logf("during the %s: 32 streams of %d tokens, %d short requests ok, %d failed; %s", action, drainTokens, okN, failed, body)
	return out
}

// A model served from a tracked registry repository: the schedule sees
// the repository move on, an update under 32 streams cuts none and the
// new replica runs on the new files, a rollback goes back the same way;
// no update, a registry that is down and a sum that does not match are
// refused with nothing changed.
func TestRegistryUpdateUnderStreams(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	const c1, c2, c3 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222", "3333333333333333333333333333333333333333"
	w1, w2, w3 := "GGUF weights of the first commit", "GGUF weights of the second commit, longer", "GGUF third"
	reg := &updatesRegistry{commit: c1, files: map[string][]byte{c1: []byte(w1)}}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	block := `
		drain_timeout 2m
		update_check 1s
		node {
			memory 4GiB
			cores 64
		}
		model d {
			engine sim
			source hf://org/repo
			option tokens_per_second 10
			option max_tokens 5
			resources {
				memory 1GiB
			}
		}
		model plain {
			engine sim
			min 0
		}` + strings.Replace(mirrorBlock(t, a, b, filepath.Join(t.TempDir(), "cache")), "sync_interval 1s", "sync_interval 1s\n\t\t\tregistry "+srv.URL, 1)
	g := startGateway(t, block, "")
	old := g.readyReplicas("d", 1)[0]
	if got := updatesWeights(t, g); got != updatesSum([]byte(w1)) {
		t.Fatalf("weights served at start: %q, want the first commit's %s", got, updatesSum([]byte(w1)))
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/d/rollback", ""); code != 409 || !strings.Contains(string(body), "no previous version") {
		t.Errorf("a rollback with no previous version: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "the first scheduled check", func() bool { return updatesGet(t, g, "").CheckedAt != nil })
	if u := updatesGet(t, g, ""); u.UpdateAvailable || u.Current != c1[:12] || u.CurrentCommit != c1 || u.Available != c1 || u.Error != "" || u.Every != "1s" {
		t.Errorf("updates before the repository moved: %+v", u)
	}

	// The repository moves on: the schedule sees it.
	reg.moveTo(c2, w2)
	waitFor(t, 20*time.Second, "the schedule to report the update", func() bool { return updatesGet(t, g, "").UpdateAvailable })
	if u := updatesGet(t, g, ""); u.Available != c2 || u.Current != c1[:12] || u.NextCheck == nil {
		t.Errorf("updates after the repository moved: %+v", u)
	}

	out := updatesUnderStreams(t, g, "update")
	if out.From != c1[:12] || out.To != c2[:12] || out.ToCommit != c2 || len(out.Replaced) != 1 || out.Replaced[0] != old.ID || len(out.Started) != 1 {
		t.Errorf("update rollout: %+v", out)
	}
	if got := updatesWeights(t, g); got != updatesSum([]byte(w2)) {
		t.Errorf("weights served after the update: %q, want the second commit's", got)
	}
	waitFor(t, 20*time.Second, "the old replica to exit", func() bool { return !processAlive(int(old.PID)) })
	if u := updatesGet(t, g, ""); u.UpdateAvailable || u.Current != c2[:12] || u.Previous != c1[:12] {
		t.Errorf("updates after the update: %+v", u)
	}

	// Nothing new: refused.
	if code, body := adminDo(t, g, "POST", "/llm/models/d/update", ""); code != 409 || !strings.Contains(string(body), "no update available") || !strings.Contains(string(body), `"error"`) {
		t.Errorf("an update with none available: %d %s", code, body)
	}

	// Back to the first commit, the same way.
	updated := g.readyReplicas("d", 1)[0]
	out = updatesUnderStreams(t, g, "rollback")
	if out.From != c2[:12] || out.To != c1[:12] || len(out.Replaced) != 1 || out.Replaced[0] != updated.ID {
		t.Errorf("rollback rollout: %+v", out)
	}
	if got := updatesWeights(t, g); got != updatesSum([]byte(w1)) {
		t.Errorf("weights served after the rollback: %q, want the first commit's", got)
	}

	// The registry is down: the update fails, nothing changes.
	rolled := g.readyReplicas("d", 1)[0]
	reg.moveTo(c3, w3)
	reg.set(true, false)
	code, body := adminDo(t, g, "POST", "/llm/models/d/update", "")
	if code != 502 || !strings.Contains(string(body), "nothing was changed") || !strings.Contains(string(body), "503") {
		t.Errorf("an update with the registry down: %d %s", code, body)
	}
	if u := updatesGet(t, g, "?check=true"); u.Error == "" || u.Current != c1[:12] {
		t.Errorf("a check with the registry down: %+v", u)
	}
	// A download that does not match the registry's sum: refused too.
	reg.set(false, true)
	code, body = adminDo(t, g, "POST", "/llm/models/d/update", "")
	if code != 502 || !strings.Contains(string(body), "nothing was changed") {
		t.Errorf("an update whose download does not match its sum: %d %s", code, body)
	}
	if now := g.readyReplicas("d", 1)[0]; now.ID != rolled.ID {
		t.Errorf("a failed update replaced replica %s by %s", rolled.ID, now.ID)
	}
	if got := updatesWeights(t, g); got != updatesSum([]byte(w1)) {
		t.Errorf("weights served after the failed updates: %q, want the first commit's", got)
	}
	if u := updatesGet(t, g, "?check=true"); u.Current != c1[:12] || !u.UpdateAvailable || u.Available != c3 {
		t.Errorf("updates after the failed updates: %+v", u)
	}

	// A model from another kind of source.
	if code, body := adminDo(t, g, "POST", "/llm/models/plain/update", ""); code != 400 || !strings.Contains(string(body), "not served from a tracked source") {
		t.Errorf("an update of an untracked model: %d %s", code, body)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/nope/rollback", ""); code != 404 {
		t.Errorf("a rollback of an unknown model: %d %s", code, body)
	}

	// ctl: the check, then the update to the third commit with its sum right.
	reg.set(false, false)
	if s, err := ctlRun(t, g, "model", "updates", "d", "--check"); err != nil || !strings.Contains(s, "update available: commit "+c3) {
		t.Errorf("ctl model updates: %v %s", err, s)
	}
	if s, err := ctlRun(t, g, "model", "update", "d"); err != nil || !strings.Contains(s, "version "+c1[:12]+" → "+c3[:12]) || !strings.Contains(s, "replaced") {
		t.Errorf("ctl model update: %v %s", err, s)
	}
	if got := updatesWeights(t, g); got != updatesSum([]byte(w3)) {
		t.Errorf("weights served after ctl model update: %q, want the third commit's", got)
	}
	if s, err := ctlRun(t, g, "model", "rollback", "d"); err != nil || !strings.Contains(s, "version "+c3[:12]+" → "+c1[:12]) {
		t.Errorf("ctl model rollback: %v %s", err, s)
	}

	// Every change is in the audit log with its actor.
	for _, action := range []string{"model updated", "model rolled back"} {
		p := g.audit("action=" + strings.ReplaceAll(action, " ", "+"))
		if len(p.Entries) != 2 {
			t.Errorf("audit entries %q: %d, want 2", action, len(p.Entries))
			continue
		}
		if e := p.Entries[1]; e.Actor != "tests" || e.Fields["model"] != "d" || e.Fields["from"] == nil {
			t.Errorf("audit entry %q: %+v", action, e)
		}
	}
}

// updatesKeyStreams opens n streamed chat requests for d with key,
// spread over the nodes, and returns once each has its first chunk.
func updatesKeyStreams(t *testing.T, gs []*gateway, key string, n, tokens int) <-chan streamResult {
	t.Helper()
	out := make(chan streamResult, n)
	var started sync.WaitGroup
	started.Add(n)
	body := fmt.Sprintf(`{"model":"d","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"tell me a story"}]}`, tokens)
	for i := range n {
		go func() {
			var once sync.Once
			first := func() { once.Do(started.Done) }
			defer first()
			req, _ := http.NewRequest("POST", gs[i%len(gs)].base+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				out <- streamResult{err: err}
				return
			}
			defer resp.Body.Close()
			res := streamResult{status: resp.StatusCode}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				s, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				first()
				res.last = s
				if strings.Contains(s, `"content":"`) && !strings.Contains(s, `"content":""`) {
					res.tokens++
				}
			}
			res.err = sc.Err()
			out <- res
		}()
	}
	done := make(chan struct{})
	go func() { started.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("streams did not start within 30s")
	}
	return out
}

// updatesClusterWeights asks through every node several times and returns
// the weight sums the answering replicas report.
func updatesClusterWeights(t *testing.T, c *cluster, key string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, name := range c.names() {
		for range 6 {
			req, _ := http.NewRequest("POST", c.nodes[name].base+"/v1/chat/completions", strings.NewReader(`{"model":"d","max_tokens":1,"messages":[{"role":"user","content":"x"}]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			seen[resp.Header.Get("X-Sim-Weights")]++
		}
	}
	return seen
}

// In a cluster of two nodes an update asked of one node replaces the
// model's replicas on both, node by node, under 32 streams with none
// cut; a rollback asked of the other node goes back the same way.
func TestRegistryUpdateInCluster(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	const c1, c2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	w1, w2 := "GGUF weights of the first commit", "GGUF weights of the second commit"
	reg := &updatesRegistry{commit: c1, files: map[string][]byte{c1: []byte(w1)}}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	mirrorFor := func() string {
		return strings.Replace(mirrorBlock(t, a, b, filepath.Join(t.TempDir(), "cache")), "sync_interval 1s", "sync_interval 1s\n\t\t\tregistry "+srv.URL, 1)
	}
	models := fmt.Sprintf(`
		drain_timeout 2m
		update_check 1s
		model d {
			engine sim
			source hf://org/repo
			option tokens_per_second 10
			option max_tokens 5
			min 2
			max 2
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
			}
		}`, tenancy.HashKey("secret-1"))
	c := &cluster{t: t, redis: startRedis(t), models: models, nodes: map[string]*gateway{}, peer: map[string]string{},
		extra: map[string]string{"n1": mirrorFor(), "n2": mirrorFor()}}
	c.add("n1")
	c.add("n2")
	for _, g := range c.nodes {
		waitFor(t, 60*time.Second, "a replica of d on each node", func() bool { return slices.Equal(g.readyOn("d"), []string{"n1", "n2"}) })
	}
	if seen := updatesClusterWeights(t, c, "secret-1"); len(seen) != 1 || seen[updatesSum([]byte(w1))] == 0 {
		t.Fatalf("weights served at start: %v, want only the first commit's", seen)
	}

	reg.moveTo(c2, w2)
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	waitFor(t, 20*time.Second, "n2's schedule to report the update", func() bool { return updatesGet(t, n2, "").UpdateAvailable })

	action := func(g *gateway, what string) llmapi.VersionRollout {
		results := updatesKeyStreams(t, []*gateway{n1, n2}, "secret-1", 32, drainTokens)
		l := steadyLoad(t, func() []*gateway { return []*gateway{n1, n2} }, "secret-1", "d", 4)
		code, body := adminDo(t, g, "POST", "/llm/models/d/"+what, "")
		if code != 200 {
			l.end()
			t.Fatalf("%s in the cluster: %d %s", what, code, body)
		}
		var out llmapi.VersionRollout
		_ = json.Unmarshal(body, &out)
		checkStreams(t, what+" in the cluster", results, 32, drainTokens)
		ok, failed := l.end()
		if len(failed) > 0 || ok == 0 {
			t.Errorf("requests during the %s in the cluster: %d ok, failed %v", what, ok, failed)
		}
		t.Logf("during the %s in the cluster: 32 streams of %d tokens, %d short requests ok; %s", what, drainTokens, ok, body)
		if len(out.Replaced) != 2 || len(out.Started) != 2 || !strings.Contains(out.Note, "node by node: ") || !strings.Contains(out.Note, "n1") || !strings.Contains(out.Note, "n2") {
			t.Errorf("%s rollout in the cluster: %s", what, body)
		}
		for _, g := range c.nodes {
			waitFor(t, 30*time.Second, "d ready on both nodes", func() bool { return slices.Equal(g.readyOn("d"), []string{"n1", "n2"}) })
		}
		return out
	}
	if out := action(n1, "update"); out.From != c1[:12] || out.To != c2[:12] {
		t.Errorf("update in the cluster: from %s to %s", out.From, out.To)
	}
	if seen := updatesClusterWeights(t, c, "secret-1"); len(seen) != 1 || seen[updatesSum([]byte(w2))] == 0 {
		t.Errorf("weights served after the update: %v, want only the second commit's", seen)
	}
	if out := action(n2, "rollback"); out.From != c2[:12] || out.To != c1[:12] {
		t.Errorf("rollback in the cluster: from %s to %s", out.From, out.To)
	}
	if seen := updatesClusterWeights(t, c, "secret-1"); len(seen) != 1 || seen[updatesSum([]byte(w1))] == 0 {
		t.Errorf("weights served after the rollback: %v, want only the first commit's", seen)
	}
	if p := n2.audit("action=model+updated"); len(p.Entries) != 1 || p.Entries[0].Node != "n1" {
		t.Errorf("the update in the cluster's audit log, read on n2: %+v", p.Entries)
	}
}
