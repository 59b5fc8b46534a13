package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleKnowledge drives the console's Knowledge page in Chromium as
// an operator: a shared knowledge base created from the form, a file
// added with the file picker and one dropped on the page, each sent with
// its progress and read to completed, then a search showing the file's
// passage with its score; then as a viewer, who has no control to change
// them and whose forced upload is refused.
func TestConsoleKnowledge(t *testing.T) {
	b := newBrowser(t)
	g := kbAdminSite(t)
	defer b.noDialogs()
	b.signIn(g.base, "ops-token")
	b.open("knowledge")
	b.until("the empty list", `(document.querySelector('#kb-stores') || {}).textContent`, 10*time.Second)
	b.do("creating a knowledge base", chromedp.SendKeys(chromedp.ID("kb-new-tenant"), "acme/research"), chromedp.SendKeys(chromedp.ID("kb-new-name"), "handbook"),
		chromedp.Click(chromedp.ID("kb-new-share")), chromedp.Click(chromedp.CSS("#kb-create-form button")))
	b.until("the store listed and open", `document.querySelector('#kb-stores tr[data-store]') && (document.querySelector('#kb-title') || {}).textContent.includes('handbook')`, 10*time.Second)

	path := filepath.Join("testdata", "kb", "security.html")
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(abs); err != nil {
		t.Fatal(err)
	}
	b.do("choosing a file", chromedp.SetUploadFiles(chromedp.ID("kb-file"), []string{abs}))
	b.until("the file sent", `document.querySelector('#kb-uploads li[data-file="security.html"][data-upload="sent"] progress[value="1"]')`, 20*time.Second)
	b.do("dropping a file", chromedp.Evaluate[chromedp.Void](`(() => {
		const dt = new DataTransfer();
		dt.items.add(new File(['# Travel\n\nBook trains for trips under 600 km; flights need approval.'], 'travel.md', {type: 'text/markdown'}));
		document.getElementById('kb-drop').dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
	})()`))
	b.until("the dropped file sent", `document.querySelector('#kb-uploads li[data-file="travel.md"][data-upload="sent"]')`, 20*time.Second)
	b.until("both files completed", `document.querySelectorAll('#kb-files tr[data-state="completed"]').length === 2`, 60*time.Second)
	b.until("the uploads' lines saying so", `[...document.querySelectorAll('#kb-uploads [data-field="state"]')].map(e => e.textContent).join() === 'completed,completed'`, 10*time.Second)
	b.until("the list's counts", `(document.querySelector('#kb-stores [data-field="files"]') || {}).textContent.includes('2 completed')`, 10*time.Second)
	b.shot("knowledge")

	b.do("searching", chromedp.SendKeys(chromedp.ID("kb-query"), "password rotation"), chromedp.Click(chromedp.CSS("#kb-search-form button")))
	b.until("a passage of security.html with its score", `(() => {
		const li = document.querySelector('#kb-results li[data-file="security.html"]');
		return li && /\d/.test(li.querySelector('[data-field="score"]').textContent) && li.querySelector('.passage').textContent.length > 10;
	})()`, 10*time.Second)
	b.shot("knowledge-search")

	// A viewer sees the stores and searches, with no control to change
	// them; an upload forced from the page is refused by the server.
	b.do("signing out", chromedp.Click(chromedp.ID("signout")))
	b.signIn(g.base, "watcher-token")
	b.open("knowledge")
	b.do("opening the store", chromedp.Click(chromedp.CSS("#kb-stores button[data-open]")))
	b.until("the store's files", `document.querySelectorAll('#kb-files tr[data-state="completed"]').length === 2 && document.querySelector('#kb-search-form')`, 10*time.Second)
	if n := eval[int](b, `document.querySelectorAll('#kb-drop, #kb-create-form, #kb-delete, #kb-reindex').length`); n != 0 {
		t.Errorf("a viewer sees %d controls that change knowledge bases", n)
	}
	forced := `(async () => {
		const s = await (await fetch('/llm/auth/session')).json();
		const id = document.querySelector('#kb-stores tr[data-store]').dataset.store;
		const fd = new FormData(); fd.append('file', new File(['x'], 'x.txt'), 'x.txt');
		const r = await fetch('/llm/kb/stores/' + id + '/files', {method: 'POST', body: fd, headers: {'X-CSRF-Token': s.csrf_token}});
		return r.status;
	})()`
	if code := eval[int](b, forced); code != 403 {
		t.Errorf("a viewer's forced upload: got %d, want 403", code)
	}
}
