package main

import (
	"bufio"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// streamResult is what one client saw of a streamed answer.
type streamResult struct {
	status int
	tokens int    // content chunks
	last   string // the last data line
	err    error
}

// openStreams starts n streamed chat requests of the given length and
// returns once each has its first chunk; results arrive on the channel
// when the streams end.
func openStreams(t *testing.T, g *gateway, model string, n, tokens int) <-chan streamResult {
	t.Helper()
	out := make(chan streamResult, n)
	var started sync.WaitGroup
	started.Add(n)
	body := fmt.Sprintf(`{"model":%q,"stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"tell me a story"}]}`, model, tokens)
	for range n {
		go func() {
			var once sync.Once
			first := func() { once.Do(started.Done) }
			defer first()
			resp, err := http.Post(g.base+"/v1/chat/completions", "application/json", strings.NewReader(body))
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

// checkStreams waits for n results and fails the test unless every stream
// ended with [DONE] after all its tokens.
func checkStreams(t *testing.T, what string, results <-chan streamResult, n, tokens int) {
	t.Helper()
	var cut []string
	for range n {
		var r streamResult
		select {
		case r = <-results:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s: streams did not end within 60s", what)
		}
		if r.err != nil || r.status != 200 || r.last != "[DONE]" || r.tokens != tokens {
			cut = append(cut, fmt.Sprintf("status %d, %d/%d tokens, last %.60q, err %v", r.status, r.tokens, tokens, r.last, r.err))
		}
	}
	if len(cut) > 0 {
		t.Errorf("%s: %d of %d streams were cut, such as: %s", what, len(cut), n, cut[0])
	}
}

const drainStreams, drainTokens = 100, 40

func drainModel(rate int) string {
	return fmt.Sprintf(`
		drain_timeout 2m
		model d {
			engine sim
			option tokens_per_second %d
		}`, rate)
}

func TestReloadThatChangesAModelDrainsItsStreams(t *testing.T) {
	// 8 s streams: a reload on a loaded machine has taken 2 s, which is
	// as long as streams at 20 tokens per second last.
	g := startGateway(t, drainModel(5), "")
	old := g.readyReplicas("d", 1)[0]
	results := openStreams(t, g, "d", drainStreams, drainTokens)

	g.reload(drainModel(6), "")
	// The old replica drains: it is still listed, and still alive, while
	// its streams run; a new replica takes new requests.
	st := g.models()["d"]
	var draining bool
	for _, r := range st.Replicas {
		draining = draining || (r.ID == old.ID && r.State == "draining")
	}
	if !draining {
		t.Errorf("after the reload the old replica is not listed as draining: %+v", st.Replicas)
	}
	if !processAlive(int(old.PID)) {
		t.Error("the old replica was stopped with streams in flight")
	}
	chatOnce(t, g, "d")
	checkStreams(t, "reload", results, drainStreams, drainTokens)
	waitFor(t, 10*time.Second, "the drained replica to exit", func() bool { return !processAlive(int(old.PID)) })
}

func TestModelStopDrainsItsStreams(t *testing.T) {
	g := startGateway(t, drainModel(20), "")
	old := g.readyReplicas("d", 1)[0]
	results := openStreams(t, g, "d", drainStreams, drainTokens)
	if code, body := adminDo(t, g, "POST", "/llm/models/d/stop", ""); code != 200 {
		t.Fatalf("stop: %d %s", code, body)
	}
	// New requests are refused at once; the streams in flight finish.
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"d","messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 503 {
		t.Errorf("a request to a stopped model: %d %s", r.StatusCode, body)
	}
	checkStreams(t, "model stop", results, drainStreams, drainTokens)
	waitFor(t, 10*time.Second, "the drained replica to exit", func() bool { return !processAlive(int(old.PID)) })
}

func TestReplicaRestartDrainsAndHoldsRequests(t *testing.T) {
	g := startGateway(t, drainModel(20), "")
	old := g.readyReplicas("d", 1)[0]
	results := openStreams(t, g, "d", drainStreams, drainTokens)
	if code, body := adminDo(t, g, "POST", "/llm/replicas/"+old.ID+"/restart", ""); code != 200 {
		t.Fatalf("restart: %d %s", code, body)
	}
	// While the only replica is replaced, new requests wait for the new
	// one rather than failing.
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := post(t, g.base+"/v1/chat/completions", `{"model":"d","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`)
			codes <- r.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a request during the restart got %d, want 200", c)
		}
	}
	checkStreams(t, "replica restart", results, drainStreams, drainTokens)
	waitFor(t, 10*time.Second, "the drained replica to exit", func() bool { return !processAlive(int(old.PID)) })
	waitFor(t, 10*time.Second, "one new replica listed", func() bool {
		rs := g.models()["d"].Replicas
		return len(rs) == 1 && rs[0].ID != old.ID
	})
}

func TestReplicaDiesRequestsWaitForItsReplacement(t *testing.T) {
	g := startGateway(t, drainModel(0), "")
	old := g.readyReplicas("d", 1)[0]
	if err := killPID(old.PID); err != nil {
		t.Fatal(err)
	}
	// The first request finds the replica gone; it waits for the
	// replacement instead of answering 502.
	r, body := post(t, g.base+"/v1/chat/completions", `{"model":"d","max_tokens":2,"messages":[{"role":"user","content":"x"}]}`)
	if r.StatusCode != 200 {
		t.Errorf("a request after the replica died: %d %s", r.StatusCode, body)
	}
}

func killPID(pid int64) error { return syscall.Kill(int(pid), syscall.SIGKILL) }
