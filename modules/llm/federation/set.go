package federation

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// pool keeps each peer's running side across reloads that leave it
// unchanged, keyed by its name and fingerprint.
var pool = caddy.NewUsagePool()

// Set is the peers of one config.
type Set struct {
	peers []*live
	keys  []string // their keys in the pool
}

// New resolves the peers' placeholders, checks them and takes (or makes)
// their running side; Close gives it back. In a cluster every node
// reaches the peers itself: their models are not placed by the cluster's
// plan (see Upstream).
func New(peers []*Peer, logger *zap.Logger) (*Set, error) {
	repl := caddy.NewReplacer()
	s := &Set{}
	names := map[string]bool{}
	for _, given := range peers {
		p := resolve(repl, given)
		if err := p.check(); err != nil {
			s.Close()
			return nil, err
		}
		if names[p.Name] {
			s.Close()
			return nil, fmt.Errorf("peer %q is declared twice", p.Name)
		}
		names[p.Name] = true
		key := "peer:" + p.Name + ":" + p.fingerprint()
		v, _, err := pool.LoadOrNew(key, func() (caddy.Destructor, error) { return newLive(p, logger) })
		if err != nil {
			s.Close()
			return nil, err
		}
		s.peers, s.keys = append(s.peers, v.(*live)), append(s.keys, key)
	}
	return s, nil
}

// resolve is a copy of p with its placeholders ({env.NAME}, {file.path})
// replaced.
func resolve(repl *caddy.Replacer, p *Peer) *Peer {
	r := *p
	r.URL, r.CA, r.Key = repl.ReplaceKnown(p.URL, ""), repl.ReplaceKnown(p.CA, ""), strings.TrimSpace(repl.ReplaceKnown(p.Key, ""))
	r.Tenants = nil
	for _, t := range p.Tenants {
		r.Tenants = append(r.Tenants, &TenantKey{Tenant: t.Tenant, Key: strings.TrimSpace(repl.ReplaceKnown(t.Key, ""))})
	}
	return &r
}

// Close gives back the peers' running side; a peer no config uses any
// more stops being checked.
func (s *Set) Close() {
	if s == nil {
		return
	}
	for _, k := range s.keys {
		_, _ = pool.Delete(k)
	}
	s.keys = nil
}

// Watch starts the peers' checks and calls changed (from a goroutine of
// its own) whenever a peer's list of models changes, until ctx is done.
func (s *Set) Watch(ctx context.Context, changed func()) {
	if s == nil {
		return
	}
	for _, l := range s.peers {
		l.start()
		go func() {
			for {
				l.mu.Lock()
				ch := l.changed
				l.mu.Unlock()
				select {
				case <-ctx.Done():
					return
				case <-ch:
					changed()
				}
			}
		}()
	}
}

// Models are the catalog entries of the peers' models: those each peer
// listed at its last good check, and those local models name as
// fallbacks or canaries under its prefix, listed before the peer is read
// so that the config loads while the peer is down. A name a local model
// has stays the local model's.
func (s *Set) Models(local []*catalog.Model) []*catalog.Model {
	if s == nil {
		return nil
	}
	taken := map[string]bool{}
	var named []string
	for _, m := range local {
		taken[m.Name] = true
		for _, a := range m.Aliases {
			taken[a] = true
		}
		named = append(named, m.Fallbacks...)
		if m.Canary != nil {
			named = append(named, m.Canary.Model)
		}
	}
	var out []*catalog.Model
	for _, l := range s.peers {
		for _, id := range l.wanted(named, taken) {
			taken[l.peer.prefix()+id] = true
			out = append(out, l.model(id))
		}
	}
	return out
}

// CheckFallbacks checks that each peer's fallbacks are models of the
// catalog (local, the config's and those added at run time).
func (s *Set) CheckFallbacks(local []*catalog.Model) error {
	names := map[string]bool{}
	for _, m := range local {
		names[m.Name] = true
		for _, a := range m.Aliases {
			names[a] = true
		}
	}
	for _, l := range s.peersOrNone() {
		for _, fb := range l.peer.Fallbacks {
			if !names[fb] {
				return fmt.Errorf("peer %q: fallback %s is not a model of the catalog; name a local model", l.peer.Name, catalog.Bounded(fb))
			}
		}
	}
	return nil
}

func (s *Set) peersOrNone() []*live {
	if s == nil {
		return nil
	}
	return s.peers
}

// wanted are the peer's model names the catalog lists: those it listed,
// and those named (under its prefix) that match its globs, but none
// taken.
func (l *live) wanted(named []string, taken map[string]bool) []string {
	l.mu.Lock()
	ids := slices.Clone(l.listed)
	l.mu.Unlock()
	pre := l.peer.prefix()
	for _, n := range named {
		if id, ok := strings.CutPrefix(n, pre); ok && id != "" && !taken[n] && l.peer.matches(id) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	return slices.DeleteFunc(ids, func(id string) bool { return taken[pre+id] })
}

// model is the catalog entry of the peer's model id, made once: the
// openai engine with the peer's API as base_url and no key of its own
// (Upstream adds it), never probed by the engine (the peer's checks say
// whether it serves).
func (l *live) model(id string) *catalog.Model {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m, ok := l.models[id]; ok {
		return m
	}
	opts := map[string]string{"base_url": l.peer.base(), "model": id, "probe_interval": "0"}
	m := &catalog.Model{Name: l.peer.prefix() + id, Engine: "openai", Options: opts, Fallbacks: l.peer.Fallbacks, Price: l.peer.Price,
		EngineVals: &catalog.EngineValues{GivenOptions: maps.Clone(opts), Options: opts}}
	l.models[id] = m
	return m
}

// Upstream is how the replicas of a peer's model reach the peer.
type Upstream interface {
	http.RoundTripper
	// Down is why the model cannot be served now, or "".
	Down() string
}

// Upstream returns how the replicas of the catalog model name reach
// their peer, and a key that changes when the peer's settings do; nil
// and "" for a model of no peer.
func (s *Set) Upstream(name string) (Upstream, string) {
	if s == nil {
		return nil, ""
	}
	for i, l := range s.peers {
		if id, ok := strings.CutPrefix(name, l.peer.prefix()); ok {
			l.mu.Lock()
			_, mine := l.models[id]
			l.mu.Unlock()
			if mine {
				return &upstream{l: l, id: id}, ":" + s.keys[i]
			}
		}
	}
	return nil, ""
}

// upstream is one model of a peer.
type upstream struct {
	l  *live
	id string
}

// Down is why the peer cannot serve the model: it is down, or its last
// check did not list the model.
func (u *upstream) Down() string {
	if why := u.l.down(); why != "" {
		return why
	}
	u.l.mu.Lock()
	defer u.l.mu.Unlock()
	if u.l.state == stateUp && !slices.Contains(u.l.listed, u.id) {
		return fmt.Sprintf("peer %q does not list a model %q (or its models globs leave it out); GET /llm/peers shows what it lists", u.l.peer.Name, u.id)
	}
	return ""
}

// RoundTrip sends a request to the peer with the key of the request's
// tenant. A peer that is down, cannot be reached or refuses the key
// answers, in the OpenAI error format, 503 or 502 naming the peer, so
// that the request goes on to a fallback or the client learns why.
func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	if why := u.l.down(); why != "" {
		return errorResponse(req, http.StatusServiceUnavailable, "peer_down", why), nil
	}
	out := req.Clone(req.Context())
	t, _ := tenancy.TenantIn(req.Context())
	out.Header.Del("Authorization")
	if key := u.l.keyFor(t); key != "" {
		out.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := u.l.tr.RoundTrip(out)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, err // the client left, or waited long enough
		}
		u.l.setDown(u.l.explain(err))
		return errorResponse(req, http.StatusServiceUnavailable, "peer_down", u.l.down()), nil
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return errorResponse(req, http.StatusBadGateway, "peer_refused_key", fmt.Sprintf(
			"peer %q refused the key this gateway sends for your tenant (%d); its operator should check the peer block's key and tenant keys", u.l.peer.Name, resp.StatusCode)), nil
	}
	return resp, nil
}

// errorResponse is an answer in the OpenAI error format, as if the peer
// had sent it.
func errorResponse(req *http.Request, status int, code, msg string) *http.Response {
	body := (&openai.Error{Status: status, Type: "server_error", Code: code, Message: msg}).JSON()
	h := http.Header{"Content-Type": {"application/json"}}
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "5")
	}
	return &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Request: req,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
}

// Status is each peer as its last check found it; keys are never in it.
func (s *Set) Status() []llmapi.PeerStatus {
	out := []llmapi.PeerStatus{}
	if s == nil {
		return out
	}
	for _, l := range s.peers {
		l.mu.Lock()
		st := llmapi.PeerStatus{Name: l.peer.Name, URL: l.peer.URL, CA: l.peer.CA, Prefix: l.peer.prefix(), Globs: l.peer.Models,
			Fallbacks: l.peer.Fallbacks, State: l.state, Reason: l.reason, Checked: l.checked, Since: l.since, Models: []string{}}
		for _, id := range l.listed {
			st.Models = append(st.Models, l.peer.prefix()+id)
		}
		l.mu.Unlock()
		for _, t := range l.peer.Tenants {
			st.Tenants = append(st.Tenants, t.Tenant)
		}
		st.DefaultKey = l.peer.Key != ""
		out = append(out, st)
	}
	return out
}
