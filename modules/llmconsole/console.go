// Package llmconsole serves the web console: plain HTML, CSS and ES
// modules embedded in the binary, which call the llm admin routes that
// llm_admin serves on the same site.
package llmconsole

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Handler{})
}

//go:embed assets
var embedded embed.FS

// Handler is http.handlers.llm_console: the web console of the gateway,
// at Path (default /console). The page signs people in and calls the
// /llm/* admin routes of the same site, so put llm_admin on /llm/* of the
// same site, served over TLS.
//
// Every answer carries a strict Content-Security-Policy (no inline
// scripts or styles, no framing), X-Frame-Options: DENY,
// X-Content-Type-Options: nosniff and Referrer-Policy: no-referrer.
// Assets carry an ETag and are revalidated (304 when unchanged). A path
// under Path that names no asset answers 404; a request outside Path goes
// to the next handler.
type Handler struct {
	// Path is where the console is served. Default: /console.
	Path string `json:"path,omitempty"`

	files map[string]*asset // by path below Path, "/" for the page
	next  caddyhttp.Handler
}

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_console",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision applies the default path and reads the assets.
func (h *Handler) Provision(caddy.Context) error {
	if h.Path == "" {
		h.Path = "/console"
	}
	h.Path = strings.TrimSuffix(h.Path, "/")
	files, err := loadAssets()
	if err != nil {
		return fmt.Errorf("llm_console: %w", err)
	}
	h.files = files
	return nil
}

// Validate checks the path.
func (h *Handler) Validate() error {
	if !strings.HasPrefix(h.Path, "/") || path.Clean(h.Path) != h.Path || h.Path == "/" {
		return fmt.Errorf("llm_console: path %q must be a clean absolute path such as /console, not /", h.Path)
	}
	return nil
}

// loadAssets reads the embedded files once; the page is served at "/".
func loadAssets() (map[string]*asset, error) {
	files := map[string]*asset{}
	err := fs.WalkDir(embedded, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := embedded.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		ctype := mime.TypeByExtension(path.Ext(p))
		switch path.Ext(p) { // the platform's table may lack these or differ
		case ".js":
			ctype = "text/javascript; charset=utf-8"
		case ".json":
			ctype = "application/json"
		case ".css":
			ctype = "text/css; charset=utf-8"
		case ".html":
			ctype = "text/html; charset=utf-8"
		case ".svg":
			ctype = "image/svg+xml"
		}
		files[strings.TrimPrefix(p, "assets")] = &asset{body: body, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded assets: %w", err)
	}
	files["/"] = files["/index.html"]
	return files, nil
}

// csp allows only the console's own files: no inline script or style, no
// framing, no other origin.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// ServeHTTP serves the page and its assets.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	p := r.URL.Path
	if p != h.Path && !strings.HasPrefix(p, h.Path+"/") {
		return next.ServeHTTP(w, r)
	}
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", csp)
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("Cross-Origin-Opener-Policy", "same-origin")
	if p == h.Path {
		// Relative asset URLs need the trailing slash.
		http.Redirect(w, r, h.Path+"/", http.StatusFound)
		return nil
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		return caddyhttp.Error(http.StatusMethodNotAllowed, fmt.Errorf("the console's files are read with GET"))
	}
	a := h.files[strings.TrimPrefix(p, h.Path)]
	if a == nil || r.URL.RawPath != "" {
		return caddyhttp.Error(http.StatusNotFound, fmt.Errorf("no console file %s", p))
	}
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("ETag", a.etag)
	// Names carry no version, so browsers keep the files but ask each
	// time; unchanged ones answer 304 without a body.
	hdr.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
