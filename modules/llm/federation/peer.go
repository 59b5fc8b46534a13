// Package federation lets the llm app use another gateway's models: a
// peer (another llmgw, or any OpenAI-compatible gateway) whose
// /v1/models it reads at start and keeps fresh, whose models it lists in
// its own catalog under a prefix (served by the openai engine, with no
// process of their own), and which it reaches with a key chosen by the
// local tenant of each request, trusting the peer's own CA when it has
// one. A peer that does not answer is shown down, with the reason, and
// its models get no request until it answers again.
package federation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// Peer is another gateway whose models this one lists and serves.
type Peer struct {
	// Name of the peer, as status and errors show it. Required.
	Name string `json:"name"`
	// URL of the peer's OpenAI-compatible API, such as
	// https://gw.example.com (its /v1 is added unless the URL ends in
	// /v1). Required; may use placeholders such as {env.PEER_URL}.
	URL string `json:"url"`
	// CA is a PEM file of the certificate authority that signs the
	// peer's certificate: it is trusted for this peer only, instead of
	// the system's roots. Default: the system's roots.
	CA string `json:"ca,omitempty"`
	// Key is the API key sent to the peer (as Authorization: Bearer) for
	// requests of tenants the tenants table does not name, and to read
	// its /v1/models. May use placeholders such as {env.PEER_KEY}. Never
	// shown back. Default: no key.
	Key string `json:"key,omitempty"`
	// Tenants maps local tenants to keys of their own at the peer, so
	// that the peer counts and limits each tenant apart.
	Tenants []*TenantKey `json:"tenants,omitempty"`
	// Models are globs of the peer's model names to list here.
	// Default: all of them (*).
	Models []string `json:"models,omitempty"`
	// Prefix is put before each of the peer's model names in the
	// catalog: a peer model chat is listed as <prefix>chat. Default:
	// "<name>/".
	Prefix *string `json:"prefix,omitempty"`
	// Fallbacks are local models tried, in order, when a model of the
	// peer cannot serve (the peer is down, refuses, or fails before its
	// answer's first byte).
	Fallbacks []string `json:"fallbacks,omitempty"`
	// Price of the peer's models' tokens, per million, for budgets and
	// usage costs here (what using the peer costs). Default: none.
	Price *catalog.Price `json:"price,omitempty"`
	// Refresh is how often the peer's /v1/models is read again; a peer
	// that is down is read every 5s (or Refresh, when shorter) until it
	// answers. Default: 30s.
	Refresh caddy.Duration `json:"refresh,omitempty"`
}

// TenantKey is the key one local tenant uses at a peer.
type TenantKey struct {
	// Tenant is an organisation, team or project (org, org/team or
	// org/team/project): its requests, and those of the levels under it
	// that have no entry of their own, use Key.
	Tenant string `json:"tenant"`
	// Key is the API key sent to the peer. May use placeholders. Never
	// shown back.
	Key string `json:"key"`
}

// prefix is the peer's prefix, or its default.
func (p *Peer) prefix() string {
	if p.Prefix == nil {
		return p.Name + "/"
	}
	return *p.Prefix
}

func (p *Peer) refresh() time.Duration {
	if p.Refresh <= 0 {
		return 30 * time.Second
	}
	return time.Duration(p.Refresh)
}

// matches reports whether the peer lists its model name.
func (p *Peer) matches(name string) bool {
	if len(p.Models) == 0 {
		return true
	}
	for _, g := range p.Models {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// check validates the peer as the config gives it, placeholders
// resolved.
func (p *Peer) check() error {
	if err := catalog.CheckName("peer name", p.Name); err != nil {
		return err
	}
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("peer %q: url %s is not an http(s) URL such as https://gw.example.com", p.Name, catalog.Bounded(p.URL))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("peer %q: url %s must not have a query or fragment", p.Name, catalog.Bounded(p.URL))
	}
	if p.CA != "" && u.Scheme != "https" {
		return fmt.Errorf("peer %q: ca is set but url %s is not https; use https://", p.Name, catalog.Bounded(p.URL))
	}
	for _, g := range p.Models {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("peer %q: models glob %s is not valid: %v", p.Name, catalog.Bounded(g), err)
		}
	}
	if err := p.Price.Validate(p.prefix() + "*"); err != nil {
		return fmt.Errorf("peer %q: %w", p.Name, err)
	}
	seen := map[string]bool{}
	for _, t := range p.Tenants {
		parts := strings.Split(t.Tenant, "/")
		if t.Tenant == "" || len(parts) > 3 || seen[t.Tenant] || t.Key == "" {
			return fmt.Errorf("peer %q: tenant %s: give each organisation, team or project (org/team/project) once, with a key", p.Name, catalog.Bounded(t.Tenant))
		}
		seen[t.Tenant] = true
	}
	return nil
}

// base is the peer's API base URL, ending in /v1.
func (p *Peer) base() string {
	b := strings.TrimRight(p.URL, "/")
	if strings.HasSuffix(b, "/v1") {
		return b
	}
	return b + "/v1"
}

// fingerprint is a hash of everything that shapes how the peer is
// reached, so that a reload that changes nothing of it keeps its state.
func (p *Peer) fingerprint() string {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// UnmarshalCaddyfile reads a peer block:
//
//	peer <name> {
//		url      <https://…>         # the peer's API (required)
//		ca       <file>              # a PEM CA trusted for this peer only
//		key      <secret>            # default key; {env.NAME} works
//		tenant   <org[/team[/project]]> key <secret>  # repeatable
//		models   <glob…>             # default *
//		prefix   <p>                 # default <name>/; "" for none
//		fallback <model…>            # local models tried when the peer fails
//		price    <input> <output>    # per million tokens, for budgets here
//		refresh  <duration>          # default 30s
//	}
func (p *Peer) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if err := caddyfileutil.NameArg(d, &p.Name); err != nil {
		return err
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "url":
			return caddyfileutil.OneArg(d, &p.URL)
		case "ca":
			return caddyfileutil.OneArg(d, &p.CA)
		case "key":
			return caddyfileutil.OneArg(d, &p.Key)
		case "tenant":
			t := new(TenantKey)
			var kw string
			if !d.Args(&t.Tenant, &kw, &t.Key) || kw != "key" || d.NextArg() {
				return d.Err("tenant takes a tenant and its key, such as: tenant acme/research key {env.ACME_PEER_KEY}")
			}
			p.Tenants = append(p.Tenants, t)
			return nil
		case "models":
			return caddyfileutil.ManyArgs(d, &p.Models)
		case "prefix":
			var s string
			err := caddyfileutil.OneArg(d, &s)
			p.Prefix = &s
			return err
		case "fallback":
			return caddyfileutil.ManyArgs(d, &p.Fallbacks)
		case "refresh":
			return caddyfileutil.DurationArg(d, &p.Refresh)
		case "price":
			var m catalog.Model
			err := catalog.ParseModelField(d, &m, "price")
			p.Price = m.Price
			return err
		}
		return d.Errf("unrecognized peer subdirective %q", dir)
	}, "tenant", "fallback")
	if err != nil {
		return err
	}
	if p.URL == "" {
		return d.Errf("peer %q: url is required, such as url https://gw.example.com", p.Name)
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Peer)(nil)
