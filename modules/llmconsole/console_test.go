package llmconsole

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func provisioned(t *testing.T, path string) *Handler {
	t.Helper()
	h := &Handler{Path: path}
	if err := h.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	return h
}

func serve(t *testing.T, h *Handler, method, target string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	if err := h.ServeHTTP(w, r, next); err != nil {
		if he, ok := err.(caddyhttp.HandlerError); ok {
			w.Code = he.StatusCode
		} else {
			t.Fatal(err)
		}
	}
	return w
}

func TestServeHeaders(t *testing.T) {
	h := provisioned(t, "")
	for _, tc := range []struct {
		name, target string
		status       int
		ctype        string
	}{
		{"page", "/console/", 200, "text/html; charset=utf-8"},
		{"script", "/console/js/main.js", 200, "text/javascript; charset=utf-8"},
		{"style", "/console/console.css", 200, "text/css; charset=utf-8"},
		{"catalog", "/console/i18n/de.json", 200, "application/json"},
		{"unknown file", "/console/js/nope.js", 404, ""},
		{"dot segments", "/console/../console/index.html", 404, ""},
		{"bare path redirects", "/console", 302, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := serve(t, h, "GET", tc.target)
			if w.Code != tc.status {
				t.Fatalf("got %d, want %d", w.Code, tc.status)
			}
			if tc.ctype != "" && w.Header().Get("Content-Type") != tc.ctype {
				t.Errorf("Content-Type: got %q, want %q", w.Header().Get("Content-Type"), tc.ctype)
			}
			want := map[string]string{"Content-Security-Policy": csp, "X-Frame-Options": "DENY",
				"X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}
			for k, v := range want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s: got %q, want %q", k, got, v)
				}
			}
		})
	}
	if w := serve(t, h, "GET", "/v1/models"); w.Code != http.StatusTeapot {
		t.Errorf("a path outside the console: got %d, want the next handler's 418", w.Code)
	}
	if w := serve(t, h, "POST", "/console/"); w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: got %d, want 405", w.Code)
	}
}

func TestServeETag(t *testing.T) {
	h := provisioned(t, "/admin/ui")
	w := serve(t, h, "GET", "/admin/ui/js/main.js")
	etag := w.Header().Get("ETag")
	if w.Code != 200 || etag == "" || w.Header().Get("Cache-Control") != "no-cache" {
		t.Fatalf("got %d ETag %q Cache-Control %q", w.Code, etag, w.Header().Get("Cache-Control"))
	}
	if w := serve(t, h, "GET", "/admin/ui/js/main.js", "If-None-Match", etag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Errorf("revalidation: got %d with %d bytes, want 304 without a body", w.Code, w.Body.Len())
	}
}

// The page loads nothing inline: the CSP would block it.
func TestNoInlineScriptOrStyle(t *testing.T) {
	page, _ := embedded.ReadFile("assets/index.html")
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`<style`),
		regexp.MustCompile(`\sstyle=`),
		regexp.MustCompile(`\son[a-z]+=`),
	} {
		if loc := bad.FindIndex(page); loc != nil {
			t.Errorf("index.html has inline code at %d: %q", loc[0], page[loc[0]:min(len(page), loc[1]+20)])
		}
	}
	walkJS(t, func(name, src string) {
		if strings.Contains(src, "innerHTML") || strings.Contains(src, "outerHTML") || strings.Contains(src, "insertAdjacentHTML") ||
			strings.Contains(src, "document.write") || strings.Contains(src, "eval(") {
			t.Errorf("%s builds HTML from strings or evaluates code; use the DOM helpers of dom.js", name)
		}
		if regexp.MustCompile(`\.style\s*[.=]|'style'`).MatchString(src) {
			t.Errorf("%s sets inline styles, which the CSP blocks; use a class of console.css", name)
		}
	})
}

func walkJS(t *testing.T, f func(name, src string)) {
	t.Helper()
	err := fs.WalkDir(embedded, "assets/js", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := embedded.ReadFile(p)
		f(p, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func catalog(t *testing.T, lang string) map[string]string {
	t.Helper()
	b, err := embedded.ReadFile("assets/i18n/" + lang + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]string
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s.json: %v", lang, err)
	}
	return c
}

func TestCatalogsHaveTheSameKeys(t *testing.T) {
	en, de := catalog(t, "en"), catalog(t, "de")
	var missing []string
	for k := range en {
		if _, ok := de[k]; !ok {
			missing = append(missing, "de lacks "+k)
		}
	}
	for k, v := range de {
		if _, ok := en[k]; !ok {
			missing = append(missing, "en lacks "+k)
		}
		if strings.TrimSpace(v) == "" {
			missing = append(missing, "de has an empty "+k)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Error(m)
	}
	// The same placeholders on both sides.
	ph := regexp.MustCompile(`\{\w+\}`)
	for k, v := range en {
		a, b := ph.FindAllString(v, -1), ph.FindAllString(de[k], -1)
		sort.Strings(a)
		sort.Strings(b)
		if strings.Join(a, ",") != strings.Join(b, ",") {
			t.Errorf("%s: placeholders %v in English, %v in German", k, a, b)
		}
	}
}

// Every key the scripts name is in the catalogs, and no sentence shown to
// people is written into a script instead of a catalog.
func TestScriptsUseTheCatalogs(t *testing.T) {
	en := catalog(t, "en")
	prefixes := map[string]bool{}
	for k := range en {
		prefixes[strings.SplitN(k, ".", 2)[0]] = true
	}
	literal := regexp.MustCompile(`'([^'\\\n]*)'|"([^"\\\n]*)"`)
	call := regexp.MustCompile(`\bt\('([^']+)'`)
	keyLike := regexp.MustCompile(`^[a-z]+(\.[a-z0-9_]+)+$`)
	// Class lists are lowercase words; text starts with a capital or has
	// three words or more.
	sentence := regexp.MustCompile(`[A-Z][a-z]+ [A-Za-z]{2,}|[A-Za-z]{2,} [a-z]{2,} [a-z]{2,}`)
	template := regexp.MustCompile("`([^`]*)`")
	placeholder := regexp.MustCompile(`\$\{[^}]*\}`)
	walkJS(t, func(name, src string) {
		for _, m := range call.FindAllStringSubmatch(src, -1) {
			if _, ok := en[m[1]]; !ok {
				t.Errorf("%s: t(%q) names no catalog key", name, m[1])
			}
		}
		for _, line := range strings.Split(src, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "//") {
				continue
			}
			for _, m := range template.FindAllStringSubmatch(line, -1) {
				if s := placeholder.ReplaceAllString(m[1], "x"); sentence.MatchString(s) {
					t.Errorf("%s: the template %q reads like text for people; put it in the catalogs and use t()", name, m[1])
				}
			}
			for _, m := range literal.FindAllStringSubmatch(line, -1) {
				s := m[1] + m[2]
				if keyLike.MatchString(s) && prefixes[strings.SplitN(s, ".", 2)[0]] {
					if _, ok := en[s]; !ok {
						t.Errorf("%s: %q looks like a catalog key but is not in en.json", name, s)
					}
				}
				if sentence.MatchString(s) && !allowed[s] {
					t.Errorf("%s: the literal %q reads like text for people; put it in the catalogs and use t()", name, s)
				}
			}
		}
	})
	for _, dyn := range []string{"state.ready", "state.starting", "state.draining", "state.stopped", "state.waiting", "state.failed", "state.idle",
		"role.admin", "role.operator", "role.viewer", "role.tenant_admin", "lang.en", "lang.de", "keys.source.config", "keys.source.runtime"} {
		if _, ok := en[dyn]; !ok {
			t.Errorf("the catalog lacks %s, which the scripts build from data", dyn)
		}
	}
}

// allowed are literals that read like words but are not shown as they
// are: the gateway's reasons, which models.js matches to translate them.
var allowed = map[string]bool{
	"starts on its first request": true,
	"a replica is starting":       true,
	"an administrator stopped it": true,
	"no replica is running":       true,
}

func TestCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name, in, path, err string
	}{
		{"bare", `llm_console`, "", ""},
		{"path", "llm_console {\n path /ui\n}", "/ui", ""},
		{"argument", `llm_console /ui`, "", "wrong argument count"},
		{"unknown", "llm_console {\n color blue\n}", "", `unknown subdirective "color"`},
		{"twice", "llm_console {\n path /a\n path /b\n}", "", "path is given twice"},
		{"relative", "llm_console {\n path ui\n}", "", "absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, want an error with %q", err, tc.err)
				}
				return
			}
			if err != nil || h.Path != tc.path {
				t.Fatalf("got %v %q, want path %q", err, h.Path, tc.path)
			}
		})
	}
}

// BenchmarkOutsidePath is what llm_console costs a request it does not
// serve (a /v1 request on a site where it runs without a route).
func BenchmarkOutsidePath(b *testing.B) {
	h := &Handler{}
	if err := h.Provision(caddy.Context{}); err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	w := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })
	b.ReportAllocs()
	for b.Loop() {
		_ = h.ServeHTTP(w, r, next)
	}
}
