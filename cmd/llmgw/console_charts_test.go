package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleCharts: the Overview leads with charts of the gateway's own
// history (GET /llm/traffic). After a burst of failing requests the
// errors chart shows them, overall, for the failing model and over a day;
// a viewer sees them.
func TestConsoleCharts(t *testing.T) {
	b := newBrowser(t)
	g := consoleSite(t, `
		model broken {
			engine sim
			option fail_status 500
		}`, "")
	defer b.noDialogs()
	waitFor(t, 60*time.Second, "sim-chat and broken ready", func() bool {
		return len(g.readyReplicas("sim-chat", 1)) == 1 && len(g.readyReplicas("broken", 1)) == 1
	})
	for range 3 {
		if code := trafficAsk(t, g, "sim-chat", "hello", true); code != 200 {
			t.Fatalf("sim-chat: %d", code)
		}
	}
	for range 6 {
		if code := trafficAsk(t, g, "broken", "hello", false); code < 500 {
			t.Fatalf("broken: %d, want a 5xx", code)
		}
	}

	b.signIn(g.base, "watcher-token")
	b.open("overview")
	b.until("six charts", `document.querySelectorAll('#traffic-charts svg.line-chart').length === 6`, 15*time.Second)
	if first := eval[string](b, `document.querySelector('#main h2').textContent`); first != "Over time" {
		t.Errorf("the Overview's first section is %q, want the charts (Over time)", first)
	}
	errorsMax := `Number(document.querySelector('#chart-errors').dataset.max)`
	if v := eval[float64](b, errorsMax); v <= 0 {
		t.Errorf("the errors chart's largest value is %v after 6 failed requests, want > 0", v)
	}
	if v := eval[float64](b, `Number(document.querySelector('#chart-requests').dataset.max)`); v <= 0 {
		t.Errorf("the requests chart's largest value is %v, want > 0", v)
	}
	if n := eval[int](b, `document.querySelectorAll('#chart-errors [data-series]').length`); n == 0 {
		t.Error("the errors chart has no line")
	}
	tip := eval[string](b, `[...document.querySelectorAll('#chart-errors .hover rect title')].map((e) => e.textContent).find((s) => /errors \(5xx, 429\): [1-9]|errors \(5xx, 429\): 0[.,]\d*[1-9]/.test(s)) || ''`)
	if tip == "" {
		t.Error("no point of the errors chart has a tooltip with errors above 0")
	}
	b.shot("overview-charts")
	// The totals count the cache's answers (two of sim-chat's three) as
	// the usage does.
	if got := b.text(`#overview-table tr[data-model="sim-chat"] td:nth-child(4)`); got != "3" {
		t.Errorf("sim-chat's requests in the Overview: %q, want 3 (one answered, two from the cache)", got)
	}

	// One model: the failing one has errors and no tokens; sim-chat none.
	pick := func(id, value string) {
		b.do("choosing "+value+" in "+id, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(
			`(() => { const s = document.getElementById(%q); s.value = %q; s.dispatchEvent(new Event('change')); })()`, id, value)))
	}
	choose := func(model string) {
		pick("traffic-model", model)
		b.until(model+" chosen", fmt.Sprintf(`document.getElementById('traffic-model').value === %q`, model), 5*time.Second)
	}
	choose("broken")
	if v := eval[float64](b, errorsMax); v <= 0 {
		t.Errorf("broken's errors chart: %v, want > 0", v)
	}
	choose("sim-chat")
	if v := eval[float64](b, errorsMax); v != 0 {
		t.Errorf("sim-chat's errors chart: %v, want 0", v)
	}
	if v := eval[float64](b, `Number(document.querySelector('#chart-ttft').dataset.max)`); v <= 0 {
		t.Errorf("sim-chat's time to first token chart: %v, want > 0 (3 streamed answers)", v)
	}
	b.shot("overview-charts-model")

	// A day in steps of 15 minutes.
	choose("")
	pick("traffic-window", "24h")
	b.until("96 points of 15 minutes", `document.querySelectorAll('#chart-errors .hover rect').length === 96`, 10*time.Second)
	b.until("the errors over the day", fmt.Sprintf(`%s > 0`, errorsMax), 10*time.Second)
	b.shot("overview-charts-day")
}
