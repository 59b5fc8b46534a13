package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/chromedp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// pagesSite runs llmgw with the console, llm_admin (root: admin,
// watcher: viewer, alpha-lead: tenant admin), a tenancy tree with limits
// and capacities, and llm_mcp at /mcp in front of a stdio server (local)
// and an OAuth one (secure, tokens per tenant) at oauthURL.
func pagesSite(t *testing.T, oauthURL string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		model sim-chat {
			engine sim
			option max_tokens 10
			owner acme/research
		}
		org acme {
			requests_per_minute 600
			budget 250 month
			capacity {
				replicas 4
				memory 64GiB
			}
			team research {
				tokens_per_minute 100000
				models sim-*
				project alpha {
					max_concurrent 8
					key k1 %s
				}
			}
		}
	}
}

:%d {
	@keyed not path /mcp/oauth/callback
	route /v1/* {
		llm_quota
		llm_router
	}
	route /mcp* {
		llm_quota @keyed
		llm_mcp {
			server local {
				command %s mcp-serve -stdio -name local
			}
			server secure {
				url %s
				oauth {
					scopes mcp
					redirect_url http://127.0.0.1:%d/mcp/oauth/callback
				}
			}
		}
	}
	route /llm/* {
		llm_admin {
			token root %s admin
			token watcher %s viewer
			token alpha-lead %s tenant_admin project acme/research/alpha
			session {
				ttl 1h
			}
		}
	}
	route /console* {
		llm_console
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), g.http, mcpServeBinary(t), oauthURL, g.http,
		tenancy.HashKey("root-token"), tenancy.HashKey("watcher-token"), tenancy.HashKey("lead-token"))
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// TestConsolePages drives the Tenants, MCP and Audit pages, the 375 px
// layout of every page, the dark theme and the banner shown while the
// gateway does not answer.
func TestConsolePages(t *testing.T) {
	secure := startOAuthUpstream(t, "secure")
	g := pagesSite(t, secure)
	b := newBrowser(t)
	defer b.noDialogs()
	b.signIn(g.base, "root-token")

	// run runs a part as a subtest, the browser failing that subtest.
	run := func(name string, part func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			parent := b.t
			b.t = t
			defer func() { b.t = parent }()
			part(t)
		})
	}
	run("loading", func(t *testing.T) { consoleLoading(t, b) })
	run("tenants", func(t *testing.T) { consoleTenants(t, b) })
	run("mcp", func(t *testing.T) { consoleMCP(t, b) })
	run("audit", func(t *testing.T) { consoleAudit(t, b, g) })
	run("375px", func(t *testing.T) { consoleNarrow(t, b) })
	run("dark", func(t *testing.T) { consoleDark(t, b) })
	run("failing refresh", func(t *testing.T) { consoleFailingRefresh(t, b) })
	run("unreachable", func(t *testing.T) { consoleUnreachable(t, b, g) })
	run("roles", func(t *testing.T) {
		b.do("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-token")))
		b.signIn(g.base, "watcher-token")
		if nav := eval[string](b, `[...document.querySelectorAll('#nav a')].map(a => a.dataset.page).join(',')`); !strings.Contains(nav, "tenants,mcp,audit") {
			t.Errorf("a viewer's pages: got %s, want tenants, mcp and audit among them", nav)
		}
		b.open("mcp")
		b.until("the servers", `document.querySelector('tr[data-server="local"]')`, 10*time.Second)
		if n := eval[int](b, `document.querySelectorAll('#page-mcp [data-act], #page-mcp form').length`); n != 0 {
			t.Errorf("a viewer sees %d change controls on the MCP page", n)
		}
		b.do("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-token")))
		b.signIn(g.base, "lead-token")
		if nav := eval[string](b, `[...document.querySelectorAll('#nav a')].map(a => a.dataset.page).join(',')`); nav != "models,keys,usage,requests,playground" {
			t.Errorf("a tenant admin's pages: got %s, want models,keys,usage,requests,playground", nav)
		}
	})
	t.Logf("screenshots in %s", b.artefacts)
}

// consoleLoading: a page shows Loading… until its first data is read,
// and no longer after.
func consoleLoading(t *testing.T, b *browser) {
	b.do("watching the page for the loading line", chromedp.Evaluate[chromedp.Void](`(() => {
		window.seenLoading = [];
		new MutationObserver((changes) => { for (const c of changes) for (const n of c.addedNodes) {
			if (n.id === 'page-loading') window.seenLoading.push(n.textContent + '|' + !!document.querySelector('#main > section[data-ready]'));
		} }).observe(document.getElementById('main'), { childList: true }); })()`))
	b.open("nodes")
	if got := eval[string](b, `window.seenLoading.join(',')`); got != "Loading…|false" {
		t.Errorf("the loading line while the nodes page's first data loads: got %q, want Loading…|false", got)
	}
	if n := eval[int](b, `document.querySelectorAll('#page-loading').length`); n != 0 {
		t.Errorf("the loading line is still there after the page was drawn")
	}
}

// consoleTenants: the configured tree, in order, with its limits and
// capacity.
func consoleTenants(t *testing.T, b *browser) {
	b.open("tenants")
	b.until("the tree", `document.querySelector('tr[data-tenant="acme/research/alpha"]')`, 10*time.Second)
	if order := eval[string](b, `[...document.querySelectorAll('#tenants-tree tr[data-tenant]')].map(r => r.dataset.kind + ':' + r.dataset.tenant).join(',')`); order != "org:acme,team:acme/research,project:acme/research/alpha" {
		t.Errorf("the tree: got %s", order)
	}
	for sel, want := range map[string][]string{
		`tr[data-tenant="acme"]`:                []string{"600 requests/min", "budget 250 per month", "Replicas: 1 of 4", "sim-chat"},
		`tr[data-tenant="acme/research"]`:       []string{"100,000 tokens/min", "models: sim-*", "Replicas: 1 (no cap)", "sim-chat"},
		`tr[data-tenant="acme/research/alpha"]`: []string{"8 in flight", "from the config file"},
	} {
		row := b.text(sel)
		for _, w := range want {
			if !strings.Contains(row, w) {
				t.Errorf("%s shows %q, want %q in it", sel, row, w)
			}
		}
	}
	if keys := b.text(`tr[data-tenant="acme/research/alpha"] [data-field="keys"]`); keys != "1" {
		t.Errorf("alpha's keys: got %q, want 1", keys)
	}
	b.shot("tenants")
}

// consoleMCP: the servers with their state and tools; an operator
// authorises the OAuth server for key k1 and the page shows the token's
// state once the consent is given.
func consoleMCP(t *testing.T, b *browser) {
	b.open("mcp")
	b.until("local up with its tools", `(() => { const r = document.querySelector('tr[data-server="local"]');
		return r && r.querySelector('[data-state="up"]') && r.querySelector('[data-field="tools"]').textContent.includes('add'); })()`, 30*time.Second)
	if row := b.text(`tr[data-server="secure"]`); !strings.Contains(row, "a token per tenant") {
		t.Errorf("the OAuth server's row: %q", row)
	}
	b.until("secure's OAuth card saying nobody authorised it", `((document.querySelector('[data-oauth="secure"] [data-field="tokens"]') || {}).textContent || '').includes('No tenant has authorised')`, 10*time.Second)
	// A tenant the server refuses: the toast gives its reason.
	b.do("authorising secure for key acme/research", chromedp.Evaluate[chromedp.Void](`(() => {
		const c = document.querySelector('[data-oauth="secure"]');
		c.querySelector('[data-field="level"]').value = 'key';
		c.querySelector('[data-field="name"]').value = 'acme/research';
		c.querySelector('[data-act="authorize"]').click(); })()`))
	b.until("the server's reason", `document.getElementById('toast').textContent.includes("The request was not valid. — tenant key \"acme/research\" has a '/' (a key id has none)")`, 10*time.Second)
	// An error with a code is said in the person's language, the
	// server's words after it.
	if got := eval[string](b, `import('./js/api.js').then((m) => m.explain(new m.APIError(503, 'redis: connection refused', '', 'kb_store_unavailable')))`); got != "The knowledge bases' store does not answer; try again shortly. — redis: connection refused" {
		t.Errorf("an error with a code: %q", got)
	}
	b.do("authorising secure for key k1", chromedp.Evaluate[chromedp.Void](`(() => {
		const c = document.querySelector('[data-oauth="secure"]');
		c.querySelector('[data-field="level"]').value = 'key';
		c.querySelector('[data-field="name"]').value = 'k1';
		c.querySelector('[data-act="authorize"]').click(); })()`))
	b.until("the consent link", `document.querySelector('[data-oauth="secure"] a[data-field="authorization-url"]')`, 20*time.Second)
	authURL := eval[string](b, `document.querySelector('[data-oauth="secure"] a[data-field="authorization-url"]').href`)
	b.shot("mcp-authorize")
	if status, page := browse(t, authURL); status != http.StatusOK || !strings.Contains(page, "llmgw is authorised") {
		t.Fatalf("consenting at %s: %d %s", authURL, status, page)
	}
	b.until("k1's token authorised", `document.querySelector('[data-oauth="secure"] tr[data-tenant="key:k1"] [data-state="authorized"]')`, 15*time.Second)
	b.until("the consent link replaced", `!document.querySelector('[data-oauth="secure"] a[data-field="authorization-url"]') &&
		document.querySelector('[data-oauth="secure"] [data-field="authorize-result"]').textContent === 'Authorised for key:k1.'`, 10*time.Second)
	b.shot("mcp")
}

// consoleAudit: changes made through the API are found by their action,
// and a filter nothing matches says so.
func consoleAudit(t *testing.T, b *browser, g *gateway) {
	if code, _, body := siteCall(t, g, "root-token", "POST", "/llm/keys", `{"project":"acme/research/alpha","id":"audited"}`); code != 201 && code != 200 {
		t.Fatalf("creating a key: %d %s", code, body)
	}
	if code, _, body := siteCall(t, g, "root-token", "DELETE", "/llm/keys/audited", ""); code >= 300 {
		t.Fatalf("revoking the key: %d %s", code, body)
	}
	b.open("audit")
	b.until("the changes", `document.querySelector('tr[data-action="key created"]') && document.querySelector('tr[data-action="key revoked"]')`, 10*time.Second)
	b.do("filtering by action", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('audit-action').value = 'key created';
		document.querySelector('#audit-form button').click(); })()`))
	b.until("only the key's creation", `document.querySelector('tr[data-action="key created"]') && !document.querySelector('tr[data-action="key revoked"]')`, 10*time.Second)
	if row := b.text(`tr[data-action="key created"]`); !strings.Contains(row, "token:root") || !strings.Contains(row, "audited") {
		t.Errorf("the key's creation: %q", row)
	}
	b.shot("audit")
	b.do("filtering by an actor nobody is", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('audit-actor').value = 'token:nobody';
		document.querySelector('#audit-form button').click(); })()`))
	b.until("the empty state", `((document.querySelector('#audit-table [data-empty]') || {}).textContent || '').includes('No change matches')`, 10*time.Second)
}

// consoleNarrow: at 375 px every page fits the width; its tables scroll
// sideways inside it.
func consoleNarrow(t *testing.T, b *browser) {
	cdpCall(b, "a phone's width", emulation.SetDeviceMetricsOverride, emulation.SetDeviceMetricsOverrideParams{Width: 375, Height: 800, DeviceScaleFactor: 1, Mobile: true})
	defer cdpCall(b, "the desktop's width", emulation.ClearDeviceMetricsOverride, cdp.Empty{})
	pages := strings.Split(eval[string](b, `[...document.querySelectorAll('#nav a')].map(a => a.dataset.page).join(',')`), ",")
	if len(pages) < 9 {
		t.Fatalf("the admin's pages: %v", pages)
	}
	for _, want := range []string{"tenants", "mcp", "audit"} {
		if !slices.Contains(pages, want) {
			t.Errorf("the admin's pages %v lack %s", pages, want)
		}
	}
	for _, p := range pages {
		b.open(p)
		time.Sleep(300 * time.Millisecond) // a part drawn after the page's first data
		if w := eval[int](b, `document.documentElement.scrollWidth`); w > 375 {
			wide := eval[string](b, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > 376).slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className).join(' ')`)
			t.Errorf("page %s is %d px wide at 375 px; wider: %s", p, w, wide)
		}
		b.shot("375-" + p)
	}
}

// cdpCall sends a DevTools command to the browser's tab.
func cdpCall[P, R any](b *browser, what string, cmd cdp.Command[P, R], params P) {
	b.t.Helper()
	if _, err := chromedp.Call(b.ctx, cmd, params); err != nil {
		b.fail(what, err)
	}
}

// consoleDark: the dark theme applies when the system asks for it.
func consoleDark(t *testing.T, b *browser) {
	dark := func(on string) {
		cdpCall(b, "prefers-color-scheme: "+on, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: on}}})
	}
	background := `getComputedStyle(document.documentElement).backgroundColor`
	dark("light")
	light := eval[string](b, background)
	dark("dark")
	defer dark("")
	b.open("nodes")
	if got := eval[string](b, background); got == light || got != "rgb(15, 20, 32)" {
		t.Errorf("the page's background in the dark theme: got %s (light: %s)", got, light)
	}
	if got := eval[string](b, `getComputedStyle(document.querySelector('#nodes-table table')).backgroundColor`); got != "rgb(23, 30, 46)" {
		t.Errorf("a table's background in the dark theme: got %s", got)
	}
	if got := eval[string](b, `getComputedStyle(document.querySelector('#nodes-table td')).color`); got != "rgb(227, 231, 239)" {
		t.Errorf("a table's text in the dark theme: got %s", got)
	}
	b.shot("dark-nodes")
	b.open("tenants")
	b.shot("dark-tenants")
	b.open("mcp")
	b.shot("dark-mcp")
}

// consoleFailingRefresh: a refresh the gateway answers with an error
// (here the browser answers /llm/node* with a 503 in the admin API's
// shape) shows one line with the reason at the top of the page, not a
// toast per refresh, and the line goes when a refresh works again.
func consoleFailingRefresh(t *testing.T, b *browser) {
	b.open("nodes")
	paused := chromedp.Events(b.ctx, fetch.RequestPaused)
	go func() {
		for ev, err := range paused {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: ev.RequestID, ResponseCode: 503,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: "application/json"}},
				Body:            []byte(`{"error":"the cluster's store does not answer; check redis"}`)})
		}
	}()
	cdpCall(b, "answering /llm/node* with 503", fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/llm/node*"}}})
	b.until("the error line", `((document.getElementById('page-error') || {}).textContent || '') === "The gateway cannot do this now; try again shortly. — the cluster's store does not answer; check redis"`, 10*time.Second)
	time.Sleep(9 * time.Second) // two more refreshes fail
	if n := eval[int](b, `document.querySelectorAll('#page-error').length + document.querySelectorAll('#toast div.error').length`); n != 1 {
		t.Errorf("error lines and toasts after three failed refreshes: %d, want the one line", n)
	}
	if !eval[bool](b, `!!document.querySelector('#nodes-table table')`) {
		t.Error("the nodes drawn before are gone")
	}
	b.shot("failing-refresh")
	cdpCall(b, "letting /llm/node* through", fetch.Disable, cdp.Empty{})
	b.until("the error line gone", `!document.getElementById('page-error')`, 10*time.Second)
}

// consoleUnreachable: when the gateway stops, one banner says so (no
// toast per failed poll) and the data is greyed; when it is back, the
// banner goes.
func consoleUnreachable(t *testing.T, b *browser, g *gateway) {
	b.open("nodes")
	g.stop()
	b.until("the banner", `!document.getElementById('offline').hidden`, 15*time.Second)
	time.Sleep(12 * time.Second) // several polls of the page fail meanwhile
	if n := eval[int](b, `[...document.querySelectorAll('.banner')].filter(e => !e.hidden).length`); n != 1 {
		t.Errorf("banners shown while the gateway is down: %d, want 1", n)
	}
	if n := eval[int](b, `document.querySelectorAll('#toast div.error').length`); n != 0 {
		t.Errorf("error toasts while the gateway is down: %d, want none", n)
	}
	if !eval[bool](b, `document.getElementById('main').classList.contains('stale') && !!document.querySelector('#nodes-table table')`) {
		t.Error("the data on screen is not kept and greyed while the gateway is down")
	}
	if got := b.text("#offline"); !strings.Contains(got, "does not answer") {
		t.Errorf("the banner says %q", got)
	}
	b.shot("unreachable")
	g.start()
	b.until("the banner gone", `document.getElementById('offline').hidden && !document.getElementById('main').classList.contains('stale')`, 20*time.Second)
	b.open("audit")
	if n := eval[int](b, `document.querySelectorAll('#page-error').length`); n != 0 {
		t.Errorf("an error is shown after the gateway came back: %s", b.text("#page-error"))
	}
}
