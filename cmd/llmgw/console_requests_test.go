package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// chatAs posts a chat completion with a key (or none) and more headers,
// and returns the status, the request id and the body.
func chatAs(t *testing.T, g *gateway, key, model, content string, hdr ...string) (int, string, string) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}]}`, model, content)
	if key != "" {
		hdr = append(hdr, "Authorization", "Bearer "+key)
	}
	code, h, raw := siteCall(t, g, "", "POST", "/v1/chat/completions", body, append(hdr, "Content-Type", "application/json")...)
	return code, h.Get("X-Request-Id"), raw
}

// TestConsoleRequestsAndPlayground: find the failed requests of one key in
// the last hour and read one; follow new requests live; chat with a model
// (and two side by side) in the playground and see the time to first
// token, the cache's and the guardrails' outcomes; the playground's
// session cannot be used without its CSRF token, nor by a viewer.
func TestConsoleRequestsAndPlayground(t *testing.T) {
	b := newBrowser(t)
	g := consoleSite(t, "\t\tmodel sim-two {\n\t\t\tengine sim\n\t\t\toption max_tokens 6\n\t\t}\n", "")
	defer b.noDialogs()

	var failed []string
	for i := range 12 {
		switch i % 4 {
		case 0:
			_, id, _ := chatAs(t, g, "secret-1", "no-such-model", "hello?")
			failed = append(failed, id)
		case 1:
			chatAs(t, g, "secret-2", "sim-chat", fmt.Sprintf("question %d", i))
		default:
			chatAs(t, g, "secret-1", "sim-chat", fmt.Sprintf("question %d", i))
		}
	}
	b.signIn(g.base, "root-token")
	b.open("requests")
	b.do("finding k1's failed requests of the last hour", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('req-key').value = 'k1';
		document.getElementById('req-status').value = 'error';
		document.getElementById('req-since').value = '1h';
		document.querySelector('#req-form button[type=submit]').click(); })()`))
	b.until("k1's three failed requests, and only them",
		`(() => { const rs = [...document.querySelectorAll('#req-rows tr')];
			return rs.length === 3 && rs.every((r) => r.querySelector('[data-status="404"]')); })()`, 15*time.Second)
	for _, id := range failed {
		if !strings.Contains(b.text("#req-rows"), id) {
			t.Errorf("failed request %s not listed", id)
		}
	}
	b.do("opening one", chromedp.Click(chromedp.CSS(`#req-rows tr[data-id="`+failed[0]+`"]`)))
	b.until("its detail", `((document.getElementById('req-detail') || {}).textContent || '').includes('model_not_found')`, 10*time.Second)
	b.shot("requests")

	// Live: a request sent now shows without a reload of the page.
	b.do("following", chromedp.Evaluate[chromedp.Void](`(() => {
		for (const id of ['req-key', 'req-status']) document.getElementById(id).value = '';
		document.querySelector('#req-form button[type=submit]').click();
		document.getElementById('req-live').click(); })()`))
	time.Sleep(500 * time.Millisecond)
	_, live, _ := chatAs(t, g, "secret-2", "sim-chat", "a live one")
	b.until("the new request in the live tail", `!!document.querySelector('#req-rows tr[data-id="`+live+`"]')`, 15*time.Second)

	// The playground: sim-chat and sim-two side by side.
	b.open("playground")
	b.do("asking two models", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('pg-model').value = 'sim-chat';
		document.getElementById('pg-compare').value = 'sim-two';
		document.getElementById('pg-system').value = 'Answer in one line.';
		document.getElementById('pg-message').value = 'What does a gateway do?';
		document.getElementById('pg-send').click(); })()`))
	b.until("both answers with their TTFT and outcomes", `['pg-answer-a', 'pg-answer-b'].every((id) => {
		const p = document.getElementById(id);
		return p.hasAttribute('data-ttft') && p.querySelector('[data-field="answer"]').textContent.length > 0 && p.querySelector('[data-field="outcomes"]'); })`, 20*time.Second)
	if s := b.text("#pg-answer-a [data-field=stats]"); !strings.Contains(s, "TTFT") || !strings.Contains(s, "cache: miss") {
		t.Errorf("the first answer's figures: %q", s)
	}
	b.shot("playground")
	// The same question again: sim-chat is cached, and the outcome says so.
	b.do("asking again", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('pg-compare').value = '';
		document.getElementById('pg-send').click(); })()`))
	b.until("a cache hit", `((document.querySelector('#pg-answer-a [data-field="outcomes"]') || {}).textContent || '').includes('cache: hit')`, 20*time.Second)
	// The guardrails run on the playground too.
	b.do("asking about project zeus", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('pg-message').value = 'tell me about Project Zeus';
		document.getElementById('pg-send').click(); })()`))
	b.until("the guardrails' refusal", `((document.querySelector('#pg-answer-a [data-field="error"]') || {}).textContent || '').toLowerCase().includes('zeus')`, 20*time.Second)
	b.shot("playground-guarded")

	// The playground's requests are the console identity's, in the log.
	var p llmapi.RequestPage
	getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/llm/requests?key=console:token:root", g.admin), &p)
	if len(p.Data) < 3 {
		t.Errorf("the playground's requests in the log as console:token:root: %d", len(p.Data))
	}

	// As an attacker: a session cookie without its CSRF token (what a
	// page of another site would send), a viewer's session, a bogus
	// cookie.
	_, root, _, _ := login(t, g, `{"method":"token","token":"root-token"}`)
	code, _, body := chatAs(t, g, "", "sim-chat", "hi", "Cookie", root.cookie)
	if code != 401 || !strings.Contains(body, "CSRF") {
		t.Errorf("a session without its CSRF token on /v1: %d %s", code, body)
	}
	code, _, body = chatAs(t, g, "", "sim-chat", "hi", "Cookie", root.cookie, "X-CSRF-Token", root.CSRFToken)
	if code != 200 {
		t.Errorf("the admin's session with its CSRF token: %d %s", code, body)
	}
	_, viewer, _, _ := login(t, g, `{"method":"token","token":"watcher-token"}`)
	code, _, body = chatAs(t, g, "", "sim-chat", "hi", "Cookie", viewer.cookie, "X-CSRF-Token", viewer.CSRFToken)
	if code != 401 || !strings.Contains(body, "viewer") {
		t.Errorf("a viewer's session on /v1: %d %s", code, body)
	}
	code, _, body = chatAs(t, g, "", "sim-chat", "hi", "Cookie", "llmgw_session="+strings.Repeat("Z", 43), "X-CSRF-Token", "x")
	if code != 401 {
		t.Errorf("a bogus session on /v1: %d %s", code, body)
	}
	_, lead, _, _ := login(t, g, `{"method":"token","token":"lead-token"}`)
	_, id, _ := chatAs(t, g, "", "sim-chat", "hi from a tenant admin", "Cookie", lead.cookie, "X-CSRF-Token", lead.CSRFToken)
	var d llmapi.RequestDetail
	waitFor(t, 10*time.Second, "the tenant admin's request in the log", func() bool {
		code, _, body := siteCall(t, g, "root-token", "GET", "/llm/requests/"+id, "")
		return code == 200 && json.Unmarshal([]byte(body), &d) == nil
	})
	if d.Tenant != "acme/research/alpha" || d.KeyID != "console:token:alpha-lead" {
		t.Errorf("the tenant admin's playground request: tenant %q key %q", d.Tenant, d.KeyID)
	}
}
