package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestConsoleThroughASecondNode: with two nodes sharing Redis, the
// console of the second node shows what went through the first: its
// failed requests in the Requests page, its errors in the Overview's
// chart; the playground answers through the second node; and an outside
// provider added through its form goes ready, or red with the reason
// when its URL is wrong.
func TestConsoleThroughASecondNode(t *testing.T) {
	b := newBrowser(t)
	defer b.noDialogs()
	provider, dead := startListingProvider(t), deadURL(t)
	c := &cluster{t: t, redis: startRedis(t), nodes: map[string]*gateway{}, peer: map[string]string{}, models: `
		runtime_hosts 127.0.0.1
		model sim-chat {
			engine sim
			option max_tokens 8
		}
		model broken {
			engine sim
			option fail_status 500
		}` + requestLogOrgs}
	c.routes = fmt.Sprintf(`
	route /llm/* {
		llm_admin {
			token root %s admin
		}
	}
	route /console* {
		llm_console
	}`, tenancy.HashKey("root-token"))
	c.add("n1")
	n2 := c.add("n2")
	n1 := c.nodes["n1"]
	waitFor(t, 60*time.Second, "both models ready", func() bool {
		return len(n1.readyReplicas("sim-chat", 1)) > 0 && len(n1.readyReplicas("broken", 1)) > 0
	})
	var failed []string
	for i := range 6 {
		code, id, _ := chatAs(t, n1, "secret-3", "broken", fmt.Sprintf("hello %d", i))
		if code < 500 {
			t.Fatalf("broken answered %d", code)
		}
		failed = append(failed, id)
		chatAs(t, n1, "secret-1", "sim-chat", fmt.Sprintf("fine %d", i))
	}

	b.signIn(n2.base, "root-token")
	b.open("requests")
	b.do("finding globex's failed requests", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('req-key').value = 'k3';
		document.getElementById('req-status').value = '5xx';
		document.querySelector('#req-form button[type=submit]').click(); })()`))
	b.until("n1's six failed requests on n2's console", `document.querySelectorAll('#req-rows tr').length === 6`, 20*time.Second)
	for _, id := range failed {
		if !strings.Contains(b.text("#req-rows"), id) {
			t.Errorf("failed request %s (taken by n1) not on n2's console", id)
		}
	}
	b.do("opening one", chromedp.Click(chromedp.CSS(`#req-rows tr[data-id="`+failed[0]+`"]`)))
	b.until("its detail naming node n1", `((document.getElementById('req-detail') || {}).textContent || '').includes('n1')`, 10*time.Second)
	b.shot("cluster-requests")

	b.open("overview")
	b.until("the errors chart with n1's errors", `Number((document.querySelector('#chart-errors') || {dataset: {}}).dataset.max) > 0`, 90*time.Second)
	b.shot("cluster-overview")

	b.open("playground")
	b.do("asking through n2", chromedp.Evaluate[chromedp.Void](`(() => {
		document.getElementById('pg-model').value = 'sim-chat';
		document.getElementById('pg-message').value = 'Which node answers?';
		document.getElementById('pg-send').click(); })()`))
	b.until("an answer with its TTFT and outcomes", `(() => { const p = document.getElementById('pg-answer-a');
		return p.hasAttribute('data-ttft') && p.querySelector('[data-field="outcomes"]'); })()`, 30*time.Second)
	b.shot("cluster-playground")

	b.open("models")
	add := func(name, baseURL string) {
		b.do("adding "+name+" through the form", chromedp.SendKeys(chromedp.ID("model-name"), name),
			chromedp.SendKeys(chromedp.ID("model-engine"), "openai"), chromedp.WaitVisible(chromedp.ID("model-opt-base_url")),
			chromedp.SendKeys(chromedp.ID("model-opt-base_url"), baseURL), chromedp.SendKeys(chromedp.ID("model-opt-api_key"), standinKey),
			chromedp.SendKeys(chromedp.ID("model-opt-probe_interval"), "300ms"),
			chromedp.Evaluate[chromedp.Void](`document.getElementById('model-add-form').requestSubmit()`))
	}
	add("standin-gpt", provider+"/v1")
	b.until("the provider ready", `document.querySelector('tr[data-model="standin-gpt"] [data-state="ready"]')`, 30*time.Second)
	add("standin-dead", dead)
	b.until("the wrong URL red", `document.querySelector('tr[data-model="standin-dead"] [data-state="failing"]')`, 30*time.Second)
	if why := b.text(`tr[data-model="standin-dead"] [data-field="reason"]`); !strings.Contains(why, "unreachable") || !strings.Contains(why, "check base_url") {
		t.Errorf("the failing provider's reason on n2's console: %q", why)
	}
	b.shot("cluster-models-provider")
}
