package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// ctlRunEnv is ctlRun with more environment variables.
func ctlRunEnv(t *testing.T, g *gateway, env []string, args ...string) (string, error) {
	t.Helper()
	all := append([]string{"ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin)}, args...)
	cmd := exec.Command(binary, all...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// A model whose start fails (its weights are not in the mirror yet) backs
// off longer after each failure. Once the weights are there, ctl model
// retry (run under sudo) starts it at once, long before its backoff would
// have, and the audit log names the person who ran sudo. A model that is
// not failing gets 409 with its state, an unknown one 404.
func TestModelRetry(t *testing.T) {
	store, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	g := startGateway(t, fmt.Sprintf(`
		model fine {
			engine sim
		}
		model late {
			engine sim
			source mirror://tiny/v1
		}
		mirror {
			store local dir %s
			cache %s
		}`, store, cache), "")
	g.readyReplicas("fine", 1)

	// Its starts fail until the backoff has grown: a request says when
	// the next start comes (Retry-After, rounded up).
	retryBy := awaitBackoff(t, g, "", 6)
	if st := g.models()["late"]; st.State != "failed" || !strings.Contains(st.Reason, "last start failed") {
		t.Fatalf("late while backing off: %s (%s), want failed with the start's error", st.State, st.Reason)
	}
	addTinyVersion(t, g)
	out, err := ctlRunEnv(t, g, []string{"SUDO_USER=alice"}, "model", "retry", "late")
	if err != nil || !strings.Contains(out, "model late: start retried now") {
		t.Fatalf("ctl model retry late: %v\n%s", err, out)
	}
	g.readyReplicas("late", 1)
	if now := time.Now(); !now.Before(retryBy) {
		t.Errorf("late was ready %s after its backoff ended, want it started by the retry well before", now.Sub(retryBy))
	}
	if resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"late","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 200 {
		t.Errorf("late after the retry: %d %s", resp.StatusCode, body)
	}

	var page llmapi.AuditPage
	g.adminGet("/llm/audit?action=retried&model=late", &page)
	if audit := page.Entries; len(audit) != 1 || audit[0].Actor != "alice" || audit[0].Action != "model start retried" {
		t.Errorf("audit of the retry: %+v, want one entry by alice (SUDO_USER), not root", page.Entries)
	}

	// Not failing: 409 with its state; unknown: 404.
	code, body := adminDo(t, g, "POST", "/llm/models/late/retry", "")
	if code != 409 || !strings.Contains(string(body), "not failing to start (it is ready") {
		t.Errorf("retry of a ready model: %d %s, want 409 saying it is ready", code, body)
	}
	out, err = ctlRun(t, g, "model", "retry", "fine")
	if err == nil || !strings.Contains(out, "not failing to start") {
		t.Errorf("ctl model retry of a ready model: %v\n%s, want a failure saying it is not failing", err, out)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/nosuch/retry", ""); code != 404 {
		t.Errorf("retry of an unknown model: %d %s, want 404", code, body)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/fine/stop", ""); code != 200 {
		t.Fatalf("stop fine: %d %s", code, body)
	}
	if code, body := adminDo(t, g, "POST", "/llm/models/fine/retry", ""); code != 409 || !strings.Contains(string(body), "it is stopped") {
		t.Errorf("retry of a stopped model: %d %s, want 409 saying it is stopped", code, body)
	}
}

// ctl model scale on a model an administrator stopped starts it with
// that many replicas, and says so.
func TestModelScaleStartsStopped(t *testing.T) {
	g := startGateway(t, `
		model base {
			engine sim
		}`, "")
	if code, body := adminDo(t, g, "POST", "/llm/models", `{"name":"rt","engine":"sim","scaling":{"min":1,"max":1}}`); code != 201 {
		t.Fatalf("add rt: %d %s", code, body)
	}
	g.readyReplicas("rt", 1)
	if out, err := ctlRun(t, g, "model", "stop", "rt"); err != nil || !strings.Contains(out, "model rt: stopped") {
		t.Fatalf("ctl model stop rt: %v\n%s", err, out)
	}
	g.readyReplicas("rt", 0)
	out, err := ctlRun(t, g, "model", "scale", "rt", "--min", "2", "--max", "3")
	if err != nil || !strings.Contains(out, "model rt: min 2, max 3") || !strings.Contains(out, "the model was stopped; the scale started it again with 2 replicas") {
		t.Fatalf("ctl model scale of a stopped model: %v\n%s", err, out)
	}
	g.readyReplicas("rt", 2)
	if st := g.models()["rt"]; st.State != "ready" {
		t.Errorf("rt after the scale: %s (%s), want ready", st.State, st.Reason)
	}
	if resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"rt","messages":[{"role":"user","content":"x"}]}`); resp.StatusCode != 200 {
		t.Errorf("rt after the scale: %d %s", resp.StatusCode, body)
	}
	var page llmapi.AuditPage
	g.adminGet("/llm/audit?action=scaled&model=rt", &page)
	if audit := page.Entries; len(audit) != 1 || audit[0].Fields["started"] != true {
		t.Errorf("audit of the scale: %+v, want one entry with started", page.Entries)
	}

	// The model stays started after a restart of llmgw.
	g.stop()
	g.start()
	g.readyReplicas("rt", 2)
}

// The console's model menu has Retry now for a failed model (and for no
// other): it starts the model at once, and the audit log names the
// signed-in token.
func TestConsoleModelRetry(t *testing.T) {
	b := newBrowser(t)
	store, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	g := consoleSite(t, fmt.Sprintf(`
		model late {
			engine sim
			source mirror://tiny/v1
		}
		mirror {
			store local dir %s
			cache %s
		}`, store, cache), "")
	defer b.noDialogs()
	b.signIn(g.base, "root-token")
	b.open("models")
	b.until("late failed", `document.querySelector('tr[data-model="late"] [data-state="failed"]')`, 30*time.Second)
	b.until("sim-chat ready", `document.querySelector('tr[data-model="sim-chat"] [data-state="ready"]')`, 30*time.Second)
	if !eval[bool](b, `document.querySelector('tr[data-model="sim-chat"] [data-act="retry"]').disabled`) {
		t.Error("Retry now is enabled on a ready model")
	}
	if eval[bool](b, `document.querySelector('tr[data-model="late"] [data-act="retry"]').disabled`) {
		t.Error("Retry now is disabled on the failed model")
	}
	b.shot("models-failed")

	retryBy := awaitBackoff(t, g, "secret-1", 6)
	addTinyVersion(t, g)
	b.until("Retry now enabled", `!document.querySelector('tr[data-model="late"] [data-act="retry"]').disabled`, 5*time.Second)
	b.do("retrying late", chromedp.Click(chromedp.CSS(`tr[data-model="late"] [data-act="retry"]`)))
	b.until("late ready", `document.querySelector('tr[data-model="late"] [data-state="ready"]')`, 15*time.Second)
	if now := time.Now(); !now.Before(retryBy) {
		t.Errorf("late was ready %s after its backoff ended, want it started by the retry well before", now.Sub(retryBy))
	}
	var page llmapi.AuditPage
	g.adminGet("/llm/audit?action=retried&model=late", &page)
	if len(page.Entries) != 1 || page.Entries[0].Actor != "token:root" {
		t.Errorf("audit of the console's retry: %+v, want one entry by token:root", page.Entries)
	}
	b.shot("models-retried")
}

// awaitBackoff waits until model late's starts have failed often enough
// that a request is told the next start is secs seconds away or more,
// and returns a time before that start. key is a /v1 key ("" for none).
func awaitBackoff(t *testing.T, g *gateway, key string, secs int) time.Time {
	t.Helper()
	var retryBy time.Time
	waitFor(t, 60*time.Second, fmt.Sprintf("a backoff of %ds or more", secs), func() bool {
		req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(`{"model":"late","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode == 503 && strings.Contains(string(body), "retrying in") && after >= secs {
			retryBy = time.Now().Add(time.Duration(after-1) * time.Second)
			return true
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	return retryBy
}

// addTinyVersion puts the weights model late starts from in the mirror.
func addTinyVersion(t *testing.T, g *gateway) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(src, []byte("GGUF weights"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, body := adminDo(t, g, "POST", "/llm/mirror/versions", fmt.Sprintf(`{"model":"tiny","version":"v1","source":%q}`, src)); code != 200 {
		t.Fatalf("mirror add: %d %s", code, body)
	}
}

// In a cluster a retry through one node reaches every node whose start
// of the model failed: each starts it again at once, and the model
// serves.
func TestClusterModelRetry(t *testing.T) {
	store := t.TempDir()
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1"))+fmt.Sprintf(`
		model late {
			engine sim
			source mirror://tiny/v1
		}
		mirror {
			store shared dir %s
		}`, store))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	waitFor(t, 60*time.Second, "late's start failed on both nodes", func() bool {
		return strings.Count(n1.logs.String(), `"msg":"starting replica"`) >= 5 && strings.Count(n2.logs.String(), `"msg":"starting replica"`) >= 5
	})
	addTinyVersion(t, n1)
	code, body := n2.adminPost("/llm/models/late/retry", "")
	var ans llmapi.Retried
	// Each node backs off 4s or more by now: both are failed.
	if code != 200 || json.Unmarshal(body, &ans) != nil || !slices.Equal(ans.Nodes, []string{"n2", "n1"}) {
		t.Fatalf("retry through n2: %d %s, want 200 naming n2 and n1", code, body)
	}
	t.Logf("retried on %v", ans.Nodes)
	for _, n := range ans.Nodes {
		if g := c.nodes[n]; g == nil || !strings.Contains(g.logs.String(), "start retried now") {
			t.Errorf("the answer names %s, whose log has no retry", n)
		}
	}
	waitFor(t, 15*time.Second, "late ready after the retry", func() bool { return len(n1.readyOn("late")) > 0 })
	if code, body := n1.adminPost("/llm/models/chat/retry", ""); code != 409 || !strings.Contains(string(body), "not failing to start") {
		t.Errorf("retry of a model no node failed to start: %d %s, want 409", code, body)
	}
}
