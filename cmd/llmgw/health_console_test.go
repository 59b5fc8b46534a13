package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleProviderHealth adds outside providers through the console's
// form (the engine's options as fields, the key in a password field): a
// live stand-in provider goes ready and its connection test answers; one
// with a wrong URL goes red with the reason, and its test says why. A
// pasted YAML model with numbers is taken.
func TestConsoleProviderHealth(t *testing.T) {
	b := newBrowser(t)
	provider := startListingProvider(t)
	dead := deadURL(t)
	g := consoleSite(t, "\t\truntime_hosts 127.0.0.1\n", "")
	defer b.noDialogs()
	b.signIn(g.base, "root-token")
	b.open("models")

	add := func(name, baseURL string) {
		b.t.Helper()
		b.do("choosing the openai engine for "+name, chromedp.SendKeys(chromedp.ID("model-name"), name),
			chromedp.SendKeys(chromedp.ID("model-engine"), "openai"), chromedp.WaitVisible(chromedp.ID("model-opt-base_url")))
		if typ := eval[string](b, `document.getElementById('model-opt-api_key').type`); typ != "password" {
			t.Errorf("the key's field is of type %q, want password", typ)
		}
		if !strings.Contains(b.text(`[data-field="engine-example"]`), "engine: openai") || !strings.Contains(b.text("#model-options"), "base_url *") {
			t.Errorf("the form shows no example or no required base_url: %q", b.text("#model-add"))
		}
		b.do("filling the options of "+name, chromedp.SendKeys(chromedp.ID("model-opt-base_url"), baseURL),
			chromedp.SendKeys(chromedp.ID("model-opt-api_key"), standinKey),
			chromedp.SendKeys(chromedp.ID("model-opt-probe_interval"), "300ms"))
		b.shot("models-provider-form")
		b.do("adding "+name, chromedp.Click(chromedp.CSS("#model-add-form button")))
	}

	add("standin-gpt", provider+"/v1")
	b.until("the stand-in provider ready", `document.querySelector('tr[data-model="standin-gpt"] [data-state="ready"]')`, 30*time.Second)
	b.do("testing its connection", chromedp.Click(chromedp.CSS(`tr[data-model="standin-gpt"] [data-act="test"]`)))
	b.until("its test answered", `((document.querySelector('tr[data-model="standin-gpt"] [data-field="test-result"]') || {}).textContent || '').includes('200 in')`, 15*time.Second)
	b.shot("models-provider-ready")

	add("standin-dead", dead)
	b.until("the wrong URL failing", `document.querySelector('tr[data-model="standin-dead"] [data-state="failing"]')`, 30*time.Second)
	row := `tr[data-model="standin-dead"]`
	if why := b.text(row + ` [data-field="reason"]`); !strings.Contains(why, "unreachable: GET "+dead+"/models") || !strings.Contains(why, "check base_url") {
		t.Errorf("the failing provider's reason: %q", why)
	}
	if bg := eval[string](b, `getComputedStyle(document.querySelector('tr[data-model="standin-dead"] [data-state]')).backgroundColor`); bg != "rgb(253, 231, 229)" {
		t.Errorf("the failing state is drawn in %s, want red", bg)
	}
	b.do("testing the dead provider", chromedp.Click(chromedp.CSS(row+` [data-act="test"]`)))
	b.until("its test says why", `((document.querySelector('tr[data-model="standin-dead"] [data-field="test-result"]') || {}).textContent || '').includes('does not serve: unreachable')`, 15*time.Second)
	b.shot("models-provider-failing")

	if eval[bool](b, `document.documentElement.outerHTML.includes(`+"'"+standinKey+"'"+`)`) {
		t.Error("the page shows the key")
	}
	for _, path := range []string{"/llm/models", "/llm/models/standin-gpt"} {
		if _, _, body := siteCall(t, g, "root-token", "GET", path, ""); strings.Contains(body, standinKey) {
			t.Errorf("GET %s shows the key", path)
		}
	}

	b.do("pasting a model with numbers", chromedp.SetValue(chromedp.ID("model-body"),
		"name: pasted-numbers\nengine: sim\noptions:\n  max_tokens: 50\n  tokens_per_second: 200.5\nscaling:\n  min: 0\n  max: 50\n"),
		// Clicked even where a toast lies over the button.
		chromedp.Click(chromedp.CSS("#model-paste-form button")))
	b.until("the pasted model listed", `document.querySelector('tr[data-model="pasted-numbers"]')`, 15*time.Second)
	t.Logf("screenshots in %s", b.artefacts)
}
