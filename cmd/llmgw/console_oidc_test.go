package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleOIDC signs in to the console in Chromium through a real
// OpenID provider (Ory Hydra, on localhost: another site than the
// console's 127.0.0.1, as a provider is): the button on the sign-in page,
// the provider's login and consent app, and back in the console signed in
// with the role the groups claim maps to.
func TestConsoleOIDC(t *testing.T) {
	b := newBrowser(t)
	defer b.noDialogs()
	t.Setenv("LLMGW_TEST_OIDC_SECRET", "console-client-secret")
	hydraPort := freePort(t)
	g := consoleSite(t, "", fmt.Sprintf(`			oidc {
				issuer http://localhost:%d/
				client_id llmgw-console
				client_secret {env.LLMGW_TEST_OIDC_SECRET}
				scopes openid profile email groups
				name "Example SSO"
				role_claim groups
				role admin llm-admins
				role viewer llm-viewers
			}`, hydraPort))
	h := startHydraAt(t, "localhost", hydraPort)
	h.createClient("llmgw-console", "console-client-secret", g.base+"/llm/auth/oidc/callback")
	h.groups["alice"] = []string{"staff", "llm-admins"}
	h.signInAs("alice")

	b.do("opening the console", chromedp.Navigate(g.base+"/console/"), chromedp.WaitVisible(chromedp.ID("signin-oidc")))
	if got := b.text("#signin-oidc"); got != "Sign in with Example SSO" {
		t.Errorf("the button says %q, want Sign in with Example SSO", got)
	}
	if href := eval[string](b, `document.getElementById('signin-oidc').getAttribute('href')`); href != "/llm/auth/oidc/start?return=%2Fconsole%2F" {
		t.Errorf("the button leads to %q", href)
	}
	b.shot("signin-oidc")
	b.do("signing in with Example SSO", chromedp.Click(chromedp.ID("signin-oidc")))
	// The browser goes to the provider, its login and consent app, and
	// back; the console then finds the session on its first load.
	b.untilAcrossPages("the overview, signed in", g.base+"/console/",
		`document.querySelector('#page-overview[data-ready]') !== null`, 30*time.Second)
	if who := b.text("#who"); who != "Alice Example (admin)" {
		t.Errorf("signed in as %q, want Alice Example (admin)", who)
	}
	if s := eval[string](b, `fetch('/llm/auth/session').then(r => r.json()).then(s => s.identity + ' ' + s.role)`); s != "oidc:alice admin" {
		t.Errorf("the session: got %q, want oidc:alice admin", s)
	}
	b.open("models")
	b.until("sim-chat listed", `document.querySelector('tr[data-model="sim-chat"]')`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('#model-add-form').length`); n != 1 {
		t.Errorf("an admin signed in through the provider sees %d forms to add a model, want 1", n)
	}
	b.shot("models-oidc")

	// Signed in through the provider: add a model and watch it start,
	// create a key, use it with an OpenAI client, see the usage move,
	// switch to German.
	b.do("adding a model", chromedp.SendKeys(chromedp.ID("model-name"), "oidc-sim"), chromedp.SendKeys(chromedp.ID("model-engine"), "sim"),
		chromedp.Click(chromedp.CSS("#model-add-form button")))
	b.until("oidc-sim ready", `document.querySelector('tr[data-model="oidc-sim"] [data-state="ready"]')`, 60*time.Second)
	b.open("keys")
	b.do("creating a key", chromedp.SendKeys(chromedp.ID("key-project"), "acme/research/alpha"), chromedp.SendKeys(chromedp.ID("key-id"), "oidc-key"),
		chromedp.Click(chromedp.CSS("#key-create-form button")))
	b.until("the secret", `document.querySelector('#key-secret-value')`, 10*time.Second)
	secret := b.text("#key-secret-value")
	b.do("dismissing the secret", chromedp.Click(chromedp.ID("key-secret-done")))
	b.open("usage")
	b.do("asking for the project's usage", chromedp.SetValue(chromedp.ID("usage-level"), "project"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('usage-name').value = 'acme/research/alpha'`),
		chromedp.Click(chromedp.CSS("#usage-form button")))
	b.until("the usage table", `document.querySelector('#usage-total-requests')`, 10*time.Second)
	before := b.text("#usage-total-requests")
	if _, apiErr := chatErr(keyClient(g, secret), "oidc-sim"); apiErr != nil {
		t.Fatalf("chat with the key made after an OpenID Connect sign-in: %v", apiErr)
	}
	b.until("the usage to move", `document.querySelector('#usage-total-requests').textContent !== `+strconv.Quote(before)+
		` && document.querySelector('#usage-out tr[data-model="oidc-sim"]')`, 15*time.Second)
	b.shot("usage-oidc")
	b.do("choosing German", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('lang'); s.value = 'de'; s.dispatchEvent(new Event('change')); })()`))
	b.until("German texts", `document.querySelector('#nav a[data-page="models"]').textContent === 'Modelle'`, 10*time.Second)
	// The changes are the person's, in the audit log.
	if code, _, body := siteCall(t, g, "root-token", "GET", "/llm/audit?actor=oidc:alice", ""); code != 200 || !strings.Contains(body, "oidc-sim") || !strings.Contains(body, "oidc-key") {
		t.Errorf("the audit log of oidc:alice: got %d %s", code, body)
	}

	// Sign out; the button is there again, in German too.
	b.do("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("signin-oidc")))
	if code := eval[int](b, `fetch('/llm/auth/session').then(r => r.status)`); code != 401 {
		t.Errorf("the session after sign-out: got %d, want 401", code)
	}
	b.do("choosing German", chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById('signin-lang'); s.value = 'de'; s.dispatchEvent(new Event('change')); })()`))
	b.until("the German button", `(document.getElementById('signin-oidc') || {}).textContent === 'Mit Example SSO anmelden'`, 10*time.Second)
	b.shot("signin-oidc-de")
}

// untilAcrossPages waits, through navigations to other sites and back,
// until the page is at prefix and a JavaScript condition holds there.
func (b *browser) untilAcrossPages(what, prefix, cond string, timeout time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + ' ' + (location.href.startsWith(`+
			fmt.Sprintf("%q", prefix)+`) && (`+cond+`))`))
		cancel()
		if err == nil {
			last = v
			if strings.HasSuffix(v, " true") {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.fail("waiting for "+what, fmt.Errorf("not after %s (last at %s)", timeout, last))
}
