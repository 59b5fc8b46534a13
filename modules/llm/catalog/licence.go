package catalog

import (
	"fmt"
	"net/url"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Licence is the licence a model is served under: a tenant's requests
// are refused until an admin of the tenant, or the operator for
// everyone, accepted it (POST /llm/models/{name}/licence/accept; the
// audit log records who and when).
type Licence struct {
	// Name of the licence, such as llama3.1-community. Required; an
	// acceptance names it, so a model whose licence changes needs
	// accepting again.
	Name string `json:"name"`
	// URL where the licence can be read.
	URL string `json:"url,omitempty"`
	// Text of the licence, or a summary of it.
	Text string `json:"text,omitempty"`
}

// checkLicence checks the model's licence.
func (m *Model) checkLicence() error {
	l := m.Licence
	if l == nil {
		return nil
	}
	if err := CheckName(fmt.Sprintf("model %q: licence name", m.Name), l.Name); err != nil {
		return err
	}
	if l.URL != "" {
		u, err := url.Parse(l.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("model %q: licence %s: url %s is not an http(s) URL", m.Name, l.Name, Bounded(l.URL))
		}
	}
	if len(l.Text) > 256<<10 {
		return fmt.Errorf("model %q: licence %s: its text is %d bytes; at most 256 KiB (give its url for the rest)", m.Name, l.Name, len(l.Text))
	}
	return nil
}

// parseLicence reads a model's licence:
//
//	licence <name> [<url>]
//	licence <name> {
//		url  <url>
//		text <text>
//	}
func parseLicence(d *caddyfile.Dispenser, m *Model) error {
	l := &Licence{}
	if !d.NextArg() {
		return d.ArgErr()
	}
	l.Name = d.Val()
	if d.NextArg() {
		l.URL = d.Val()
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "url":
			return caddyfileutil.OneArg(d, &l.URL)
		case "text":
			return caddyfileutil.OneArg(d, &l.Text)
		}
		return d.Errf("unrecognized licence subdirective %q; use url or text", dir)
	})
	m.Licence = l
	return err
}
