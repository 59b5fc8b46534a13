package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// consoleSite runs llmgw with the console, llm_admin (root: admin,
// watcher: viewer, alpha-lead: tenant admin of acme/research/alpha) with
// sessions, and /v1 behind llm_quota. more goes
// into the llm block (models, keys), adminExtra into llm_admin's.
func consoleSite(t *testing.T, more, adminExtra string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		model sim-chat {
			engine sim
			option max_tokens 10
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
				project beta {
					key k2 %s
				}
			}
		}
%s
	}
}

:%d {
	route /v1/* {
		llm_quota
		llm_guardrails {
			regex topics {
				deny zeus "(?i)project\s+zeus"
				on input
			}
		}
		llm_cache {
			models sim-chat
		}
		llm_router
	}
	route /llm/* {
		llm_admin {
			token root %s admin
			token watcher %s viewer
			token alpha-lead %s tenant_admin project acme/research/alpha
			session {
				ttl 1h
			}
%s
		}
	}
	route /console* {
		llm_console
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), tenancy.HashKey("secret-2"), more, g.http,
		tenancy.HashKey("root-token"), tenancy.HashKey("watcher-token"), tenancy.HashKey("lead-token"), adminExtra)
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// browser is a headless Chromium tab, with the page's dialogs and
// uncaught exceptions recorded.
type browser struct {
	t         *testing.T
	ctx       context.Context
	artefacts string
	mu        sync.Mutex
	dialogs   []string
}

// newBrowser starts Debian's Chromium with a fresh profile. Without it the
// test is skipped, except in CI, where it fails.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed; .ci/install installs it")
		}
		t.Skip("chromium is not installed (apt-get install chromium)")
	}
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, artefacts: os.Getenv("LLMGW_ARTEFACTS")}
	if b.artefacts == "" {
		b.artefacts = t.TempDir()
	} else if err := os.MkdirAll(b.artefacts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	messages := chromedp.Console(ctx)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.dialogs = append(b.dialogs, ev.Message)
			b.mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() {
				t.Errorf("the page threw: %s", m.String())
			}
			if strings.Contains(m.Text, "Content Security Policy") {
				t.Errorf("the page broke its Content-Security-Policy: %s", m.Text)
			}
		}
	}()
	return b
}

// noDialogs fails the test if the page opened an alert, confirm or prompt.
func (b *browser) noDialogs() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		b.t.Errorf("the page opened dialogs: %q", b.dialogs)
	}
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// fail ends the test with what the page shows, and its screenshot named
// after the test (the console tests may run side by side).
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	b.shot("failed-" + strings.ReplaceAll(b.t.Name(), "/", "-"))
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	b.t.Fatalf("%s: %v\nthe page shows:\n%s", what, err, text)
}

// eval runs an expression (awaiting a promise) and returns its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("evaluating "+expr, err)
	}
	return v
}

// until waits for a JavaScript condition to hold.
func (b *browser) until(what, expr string, timeout time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout+5*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(100*time.Millisecond),
		chromedp.WithPollingTimeout(timeout))); err != nil {
		b.fail("waiting for "+what, err)
	}
}

// open goes to a page of the console and waits until it is drawn.
func (b *browser) open(name string) {
	b.t.Helper()
	b.do("opening "+name, chromedp.Evaluate[chromedp.Void](`location.hash = '#/`+name+`'`),
		chromedp.WaitVisible(chromedp.CSS("#page-"+name+"[data-ready]")))
}

func (b *browser) shot(name string) {
	b.t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.artefacts, "console-"+name+".png"), buf, 0o644); err != nil {
		b.t.Error(err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, `(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ''`)
}

func (b *browser) signIn(base, token string) {
	b.t.Helper()
	b.do("opening the sign-in page", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible(chromedp.ID("signin-token")))
	b.do("signing in", chromedp.SendKeys(chromedp.ID("signin-token"), token), chromedp.Click(chromedp.CSS("#signin-token-form button")))
	b.until("the first page after sign-in", `document.querySelector('#page-overview[data-ready], #page-models[data-ready]')`, 15*time.Second)
}

// forcedChange is a change request made by the page's own script with
// the session's CSRF token: the server decides, not the page.
const forcedChange = `(async () => {
	const s = await (await fetch('/llm/auth/session')).json();
	const r = await fetch('/llm/models/sim-chat/stop', {method: 'POST', headers: {'X-CSRF-Token': s.csrf_token}});
	return r.status;
})()`

// TestConsole drives the console in Chromium as an admin and as a viewer.
func TestConsole(t *testing.T) {
	b := newBrowser(t)
	stores := t.TempDir()
	g := consoleSite(t, fmt.Sprintf("\t\tmirror {\n\t\t\tstore a dir %s\n\t\t\tstore b dir %s\n\t\t\tsync_interval 1s\n\t\t}\n",
		filepath.Join(stores, "a"), filepath.Join(stores, "b")), "")
	defer b.noDialogs()

	// Sign in with an admin token through the form; the models show.
	b.do("opening the console", chromedp.Navigate(g.base+"/console/"), chromedp.WaitVisible(chromedp.ID("signin-token")))
	b.shot("signin")
	b.signIn(g.base, "root-token")
	b.shot("overview")
	b.open("models")
	b.until("sim-chat listed", `document.querySelector('tr[data-model="sim-chat"]')`, 10*time.Second)

	// Add a sim model from the form and watch it become ready.
	b.do("adding a model", chromedp.SendKeys(chromedp.ID("model-name"), "console-sim"), chromedp.SendKeys(chromedp.ID("model-engine"), "sim"),
		chromedp.Click(chromedp.CSS("#model-add-form button")))
	b.until("console-sim ready", `document.querySelector('tr[data-model="console-sim"] [data-state="ready"]')`, 60*time.Second)
	b.shot("models")

	// The Manage panel: console-sim becomes sim-chat's canary at 25%,
	// the gateway keeps it, and console-sim restarts without downtime.
	b.do("setting a canary", chromedp.Evaluate[chromedp.Void](`(() => {
		const d = document.querySelector('details.manage[data-model="sim-chat"]'); d.open = true;
		d.querySelector('[data-field="canary-model"]').value = 'console-sim';
		d.querySelector('[data-field="canary-share"]').value = '25';
		d.querySelector('[data-act="canary"]').click(); })()`))
	b.until("the canary shown", `((document.querySelector('tr[data-model="sim-chat"] [data-field="canary"]') || {}).textContent || '').includes('console-sim')`, 10*time.Second)
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/models/sim-chat", ""); code != 200 || !strings.Contains(body, `"canary":{"model":"console-sim","share":0.25}`) {
		t.Errorf("the canary set in the console: got %d %s", code, body)
	}
	b.shot("models-manage")
	// Updates: sim-chat has no registry source, and the panel says so.
	b.do("checking for updates", chromedp.Evaluate[chromedp.Void](`document.querySelector('details.manage[data-model="sim-chat"] [data-act="updates"]').click()`))
	b.until("the gateway's answer on updates", `((document.querySelector('details.manage[data-model="sim-chat"] [data-field="updates-error"]') || {}).textContent || '').includes('tracked')`, 10*time.Second)
	b.do("restarting console-sim", chromedp.Evaluate[chromedp.Void](`(() => {
		const d = document.querySelector('details.manage[data-model="console-sim"]'); d.open = true;
		const r = d.querySelector('[data-act="restart"]'); r.click(); r.click(); })()`))
	b.until("the restart done", `((document.getElementById('toast') || {}).textContent || '').includes('console-sim')`, 60*time.Second)
	b.until("console-sim ready again", `document.querySelector('tr[data-model="console-sim"] [data-state="ready"]')`, 60*time.Second)
	b.do("removing the canary", chromedp.Evaluate[chromedp.Void](`(() => {
		const d = document.querySelector('details.manage[data-model="sim-chat"]'); d.open = true;
		d.querySelector('[data-field="canary-model"]').value = '';
		d.querySelector('[data-act="canary"]').click(); })()`))
	b.until("the canary gone", `!document.querySelector('tr[data-model="sim-chat"] [data-field="canary"]')`, 10*time.Second)

	// Create a key: its secret is shown once.
	b.open("keys")
	b.do("creating a key", chromedp.SendKeys(chromedp.ID("key-project"), "acme/research/alpha"), chromedp.SendKeys(chromedp.ID("key-id"), "console-key"),
		chromedp.Click(chromedp.CSS("#key-create-form button")))
	b.until("the secret", `document.querySelector('#key-secret-value')`, 10*time.Second)
	secret := b.text("#key-secret-value")
	b.shot("keys")
	if len(secret) < 20 {
		t.Fatalf("the secret shown: %q", secret)
	}
	b.do("dismissing the secret", chromedp.Click(chromedp.ID("key-secret-done")))
	b.until("the key listed", `document.querySelector('tr[data-key="console-key"]')`, 10*time.Second)
	// Its own limits, set on the page, are the gateway's.
	b.do("setting the key's limits", chromedp.Evaluate[chromedp.Void](`(() => {
		const d = document.querySelector('details.manage[data-key="console-key"]'); d.open = true;
		d.querySelector('[data-limit="requests_per_minute"]').value = '600';
		d.querySelector('[data-limit="max_concurrent"]').value = '8';
		d.querySelector('[data-act="limits"]').click(); })()`))
	b.until("the limits shown", `((document.querySelector('tr[data-key="console-key"] [data-field="limits"]') || {}).textContent || '').includes('600')`, 10*time.Second)
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/keys/console-key", ""); code != 200 || !strings.Contains(body, `"requests_per_minute":600`) || !strings.Contains(body, `"max_concurrent":8`) {
		t.Errorf("the key's limits set in the console: got %d %s", code, body)
	}
	if body := eval[string](b, `document.body.innerText`); strings.Contains(body, secret) {
		t.Errorf("the secret is still shown after it was dismissed")
	}

	// Use it with an OpenAI client; the usage moves.
	b.open("usage")
	b.do("asking for the project's usage", chromedp.SetValue(chromedp.ID("usage-level"), "project"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('usage-name').value = 'acme/research/alpha'`),
		chromedp.Click(chromedp.CSS("#usage-form button")))
	b.until("the usage table", `document.querySelector('#usage-total-requests')`, 10*time.Second)
	before := b.text("#usage-total-requests")
	for range 2 {
		if _, apiErr := chatErr(keyClient(g, secret), "console-sim"); apiErr != nil {
			t.Fatalf("chat with the console's key: %v", apiErr)
		}
	}
	b.until("the usage to move", `document.querySelector('#usage-total-requests').textContent !== `+strconv.Quote(before)+
		` && document.querySelector('#usage-out tr[data-model="console-sim"]')`, 15*time.Second)
	b.until("this hour's bar", `(() => { const bars = document.querySelectorAll('#usage-hours rect'); const last = bars[bars.length - 1];
		return bars.length === 24 && last.getAttribute('height') > 0 && last.textContent.includes('2'); })()`, 10*time.Second)
	b.shot("usage")
	b.open("overview")
	b.until("the overview to count the requests", `(() => { const r = document.querySelector('#overview-table tr[data-model="console-sim"]');
		return r && r.children[3].textContent === '2'; })()`, 10*time.Second)
	b.shot("overview-after")
	var ov struct{ Models []llmapi.ModelOverview }
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/overview", ""); code != 200 || json.Unmarshal([]byte(body), &ov) != nil {
		t.Errorf("GET /llm/overview: got %d %s", code, body)
	}
	for _, m := range ov.Models {
		if m.Model == "console-sim" && (m.Requests != 2 || m.Errors != 0 || m.Ready != 1 || m.State != "ready" ||
			m.CompletionTokens == 0 || m.TokensPerSecond <= 0) {
			t.Errorf("the overview of console-sim: %+v", m)
		}
	}
	weights := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := os.WriteFile(weights, []byte("GGUF weights of a test"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, body := siteCall(t, g, "root-token", "POST", "/llm/mirror/versions", fmt.Sprintf(`{"model":"tiny","version":"v1","source":%q}`, weights)); code != 200 && code != 201 {
		t.Fatalf("adding a version to the mirror: got %d %s", code, body)
	}
	b.open("mirror")
	b.until("the version in both stores", `(document.querySelector('tr[data-version="tiny/v1"]') || {}).textContent.includes('a, b') && document.querySelector('#mirror-stores tr[data-store="b"]')`, 15*time.Second)
	b.shot("mirror")

	// The cache: an answer stored and found again, then purged.
	for range 2 {
		if _, apiErr := chatErr(keyClient(g, "secret-1"), "sim-chat"); apiErr != nil {
			t.Fatalf("chat with sim-chat: %v", apiErr)
		}
	}
	b.open("cache")
	b.until("the cache's entry and hit", `(() => { const c = (f) => (document.querySelector('#cache-stats td[data-field="' + f + '"]') || {}).textContent;
		return c('entries') === '1' && c('hits_exact') === '1'; })()`, 10*time.Second)
	b.shot("cache")
	b.do("purging sim-chat's entries", chromedp.SendKeys(chromedp.ID("purge-model"), "sim-chat"),
		chromedp.Click(chromedp.ID("purge-button")), chromedp.Click(chromedp.ID("purge-button")))
	b.until("the purge", `document.getElementById('toast').textContent.includes('Entries purged: 1.') &&
		document.querySelector('#cache-stats td[data-field="entries"]').textContent === '0'`, 10*time.Second)
	b.open("nodes")
	b.shot("nodes")

	// Guardrails: a request the topics check blocks is counted, in the
	// overview's answer and on the page.
	guarded := keyClient(g, "secret-1")
	if _, err := guarded.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "sim-chat",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about project zeus")}}); err == nil {
		t.Fatal("a request about project zeus was not blocked")
	}
	var gov struct{ Guardrails llmapi.GuardrailOverview }
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/overview", ""); code != 200 || json.Unmarshal([]byte(body), &gov) != nil {
		t.Fatalf("GET /llm/overview: got %d %s", code, body)
	}
	blocked := -1
	for _, c := range gov.Guardrails.Checks {
		if c.Check == "topics" && c.Stage == "input" {
			blocked = int(c.Outcomes["blocked"])
			if c.Outcomes["passed"] < 2 {
				t.Errorf("the topics check passed %d requests, want at least 2", c.Outcomes["passed"])
			}
		}
	}
	if blocked != 1 {
		t.Errorf("the topics check's blocks in the overview: got %d, want 1 (%+v)", blocked, gov.Guardrails)
	}
	b.open("guardrails")
	b.until("the block counted", `(document.querySelector('#guard-checks tr[data-check="topics"][data-stage="input"] td[data-outcome="blocked"] .count') || {}).textContent === '1'`, 10*time.Second)
	// The outcomes over time, kept by the gateway: the last hour's bars
	// hold the block.
	b.until("the block in the outcomes over time", `[...document.querySelectorAll('#guard-history rect[data-outcome="blocked"]')].reduce((a, r) => a + +r.dataset.count, 0) === 1`, 10*time.Second)
	b.do("choosing the last hour", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector('#guard-window'); s.value = '1h'; s.dispatchEvent(new Event('change')); })()`))
	b.until("the last hour in steps of 5 minutes", `document.querySelectorAll('#guard-history g[data-step]').length === 12 && [...document.querySelectorAll('#guard-history rect[data-outcome="passed"]')].reduce((a, r) => a + +r.dataset.count, 0) >= 2`, 10*time.Second)
	b.shot("guardrails")

	// A value with markup renders as text: a model name the gateway
	// refuses (its error shows the name) and a source it keeps.
	b.open("models")
	b.do("adding a model named <script>", chromedp.SendKeys(chromedp.ID("model-name"), "<script>alert(1)</script>"),
		chromedp.SendKeys(chromedp.ID("model-engine"), "sim"), chromedp.Click(chromedp.CSS("#model-add-form button")))
	b.until("the refusal", `document.getElementById('toast').textContent.includes('<script>alert(1)</script>')`, 10*time.Second)
	b.do("pasting a model whose source has markup", chromedp.SetValue(chromedp.ID("model-body"),
		"name: xss-src\nengine: sim\nsource: \"<img src=x onerror=alert(2)><script>alert(3)</script>\"\nscaling:\n  min: 0\n"),
		// Clicked even where a toast lies over the button.
		chromedp.Click(chromedp.CSS("#model-paste-form button")))
	b.until("the model with markup listed", `document.querySelector('tr[data-model="xss-src"]')`, 10*time.Second)
	if row := b.text(`tr[data-model="xss-src"]`); !strings.Contains(row, "<img src=x onerror=alert(2)><script>alert(3)</script>") {
		t.Errorf("the source is not shown as text: %q", row)
	}
	if n := eval[int](b, `document.querySelectorAll('main img, main script, #toast script').length`); n != 0 {
		t.Errorf("markup from data became %d elements", n)
	}
	b.shot("xss")

	// German: the texts change, and the choice is kept with the person.
	b.do("choosing German", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('lang'); s.value = 'de'; s.dispatchEvent(new Event('change')); })()`))
	b.until("German texts", `document.querySelector('#nav a[data-page="models"]').textContent === 'Modelle' && document.querySelector('#page-models h1').textContent === 'Modelle'`, 10*time.Second)
	// The page draws its heading first and its table once the models are read.
	b.until("the models table in German", `((document.querySelector('tr[data-model="xss-src"]') || {}).textContent || '').includes('ruht')`, 10*time.Second)
	if row := b.text(`tr[data-model="xss-src"]`); !strings.Contains(row, "ruht") || !strings.Contains(row, "startet mit der ersten Anfrage") {
		t.Errorf("the state and reason in German: %q", row)
	}
	b.shot("models-de")
	if lang := eval[string](b, `fetch('/llm/auth/session').then(r => r.json()).then(s => s.lang)`); lang != "de" {
		t.Errorf("the session's language: got %q, want de", lang)
	}

	// Sign out: the session ends on the server too.
	b.do("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-token")))
	if got := b.text("#signin-info"); got != "Sie sind abgemeldet." {
		t.Errorf("after sign-out the page says %q", got)
	}
	if code := eval[int](b, `fetch('/llm/auth/session').then(r => r.status)`); code != 401 {
		t.Errorf("the session after sign-out: got %d, want 401", code)
	}

	// A viewer sees no change buttons, and a forced change answers 403.
	b.signIn(g.base, "watcher-token")
	b.open("models")
	b.until("the models", `document.querySelector('tr[data-model="console-sim"]')`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('#model-add, [data-act], #key-create-form').length`); n != 0 {
		t.Errorf("a viewer sees %d change controls on the models page", n)
	}
	b.shot("models-viewer")
	b.open("keys")
	if n := eval[int](b, `document.querySelectorAll('#key-create-form, [data-act]').length`); n != 0 {
		t.Errorf("a viewer sees %d change controls on the keys page", n)
	}
	b.open("cache")
	if n := eval[int](b, `document.querySelectorAll('#purge-button').length`); n != 0 {
		t.Errorf("a viewer sees the purge button")
	}
	if code := eval[int](b, forcedChange); code != 403 {
		t.Errorf("a viewer's forced change: got %d, want 403", code)
	}

	// A tenant admin sees its pages and its keys only, and creates keys
	// in its project.
	b.do("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-token")))
	b.signIn(g.base, "lead-token")
	if nav := eval[string](b, `[...document.querySelectorAll('#nav a')].map(a => a.dataset.page).join(',')`); nav != "models,keys,usage,requests,playground" {
		t.Errorf("a tenant admin's pages: got %s, want models,keys,usage,requests,playground", nav)
	}
	b.open("keys")
	b.until("its keys", `document.querySelector('tr[data-key="console-key"]')`, 10*time.Second)
	if keys := eval[string](b, `[...document.querySelectorAll('#keys-table tr[data-key]')].map(r => r.dataset.key).sort().join(',')`); keys != "console-key,k1" {
		t.Errorf("a tenant admin's keys: got %s, want console-key,k1", keys)
	}
	if project := eval[string](b, `document.getElementById('key-project').value`); project != "acme/research/alpha" {
		t.Errorf("the project to create a key in: got %q", project)
	}
	if n := eval[int](b, `document.querySelectorAll('#key-id').length`); n != 0 {
		t.Errorf("a tenant admin is offered %d key id fields; llmgw names its keys", n)
	}
	b.shot("keys-tenant")
	t.Logf("screenshots in %s", b.artefacts)
}

// TestConsoleSpeed measures how long each page takes to be drawn with 100
// models and 10,000 keys; it reports, it asserts no time.
func TestConsoleSpeed(t *testing.T) {
	b := newBrowser(t)
	var more strings.Builder
	for i := range 100 {
		fmt.Fprintf(&more, "\t\tmodel m%03d {\n\t\t\tengine sim\n\t\t\tmin 0\n\t\t}\n", i)
	}
	more.WriteString("\t\torg big {\n\t\t\tteam t {\n\t\t\t\tproject p {\n")
	for i := range 10000 {
		fmt.Fprintf(&more, "\t\t\t\t\tkey k%05d %s\n", i, tenancy.HashKey(fmt.Sprintf("s%05d", i)))
	}
	more.WriteString("\t\t\t\t}\n\t\t\t}\n\t\t}\n")
	g := consoleSite(t, more.String(), "")
	b.signIn(g.base, "root-token")
	got := map[string][]int{}
	for round := range 3 {
		for _, p := range []string{"overview", "models", "keys", "usage", "cache", "mirror", "nodes"} {
			start := time.Now()
			b.open(p)
			wall := time.Since(start)
			ms, _ := strconv.Atoi(eval[string](b, `document.querySelector('#page-`+p+`').dataset.ready`))
			got[p] = append(got[p], ms)
			if round == 0 {
				b.shot("speed-" + p)
			}
			// As a person would: the page's own background work (the key
			// list's refresh, the usage's hours) ends before the next.
			time.Sleep(time.Second)
			t.Logf("round %d %-8s ready in %4d ms in the page (%4d ms with the test's round trips)", round, p, ms, wall.Milliseconds())
		}
	}
	rows := eval[int](b, `(location.hash = '#/keys', new Promise(r => setTimeout(() => r(document.querySelectorAll('#keys-table tbody tr').length), 1500)))`)
	out, _ := json.Marshal(got)
	t.Logf("ms per page over 3 rounds: %s; key rows drawn of 10,002: %d", out, rows)

	// The Keys page asks the server for each page and for the filter.
	rowsAre := func(n int, first string) string {
		return fmt.Sprintf(`(() => { const r = document.querySelectorAll('#keys-table tbody tr'); return r.length === %d && r[0].dataset.key === %q; })()`, n, first)
	}
	b.until("the first page of keys", rowsAre(50, "k00000"), 10*time.Second)
	b.do("the next page", chromedp.Click(chromedp.ID("key-next")))
	b.until("the second page of keys", rowsAre(50, "k00050"), 10*time.Second)
	b.do("the previous page", chromedp.Click(chromedp.ID("key-prev")))
	b.until("the first page again", rowsAre(50, "k00000"), 10*time.Second)
	b.do("filtering", chromedp.SendKeys(chromedp.ID("key-filter"), "k0999"))
	b.until("the filtered keys", rowsAre(10, "k09990")+` && document.getElementById('key-next').disabled`, 10*time.Second)
	if count := b.text("#key-count"); count != "10 keys · page 1 of 1" {
		t.Errorf("the filtered count: %q", count)
	}
}

// TestConsoleLDAP signs in through the directory form: a person of a
// mapped group gets in with the group's role; a wrong password and a
// person in no mapped group are refused with a sentence of the catalog.
func TestConsoleLDAP(t *testing.T) {
	s := startSlapd(t)
	b := newBrowser(t)
	t.Setenv("LLMGW_TEST_LDAP_PASSWORD", "svc-pw")
	g := consoleSite(t, "", ldapBlock(s, false))
	ldapSignIn := func(user, pw string) {
		b.do("opening the sign-in page", chromedp.Navigate(g.base+"/console/"), chromedp.WaitVisible(chromedp.ID("signin-user")))
		b.do("signing in as "+user, chromedp.SendKeys(chromedp.ID("signin-user"), user), chromedp.SendKeys(chromedp.ID("signin-pass"), pw),
			chromedp.Click(chromedp.CSS("#signin-ldap-form button")))
	}
	ldapSignIn("alice", "wrong")
	b.until("the refusal", `document.getElementById('signin-error').textContent.startsWith('Not signed in, or the credentials are wrong.')`, 10*time.Second)
	ldapSignIn("nora", "nora-pw")
	b.until("the refusal", `document.getElementById('signin-error').textContent.startsWith('Your role may not do this.')`, 10*time.Second)
	b.shot("ldap-refused")
	// German, chosen on the sign-in page, kept in this browser.
	b.do("choosing German", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('signin-lang'); s.value = 'de'; s.dispatchEvent(new Event('change')); })()`))
	b.until("the German sign-in page", `(document.querySelector('#page-signin h1') || {}).textContent === 'Bei llmgw anmelden'`, 10*time.Second)
	ldapSignIn("alice", "alice-pw")
	b.until("the overview", `document.querySelector('#page-overview[data-ready]')`, 15*time.Second)
	if who := b.text("#who"); who != "Alice Example (Administrator)" {
		t.Errorf("signed in as %q, want Alice Example (Administrator)", who)
	}
	b.shot("ldap-overview")

	// The session ended elsewhere (another tab signs out): the page sees
	// it at its next refresh and asks to sign in again.
	b.do("signing out elsewhere", chromedp.Evaluate[chromedp.Void](`fetch('/llm/auth/session').then(r => r.json()).then(s =>
		fetch('/llm/auth/logout', {method: 'POST', headers: {'X-CSRF-Token': s.csrf_token}}))`, chromedp.EvalAwaitPromise))
	b.until("the sign-in page", `(document.getElementById('signin-info') || {}).textContent === 'Ihre Sitzung ist abgelaufen; bitte melden Sie sich erneut an.'`, 10*time.Second)
	b.noDialogs()
}
