package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Adapter is a LoRA adapter of a model, served under its own name: a
// request whose model is the adapter's name goes to the model's replicas
// (which load every adapter of the model) and is answered with the adapter
// applied. Quotas, tenancy model globs, the cache and guardrails treat the
// name as a model of its own. Adding, changing or removing an adapter
// changes what the model's replicas load, so they are replaced (on a
// reload, or through the admin API's model changes).
type Adapter struct {
	// Name clients put in the request's model field. Required; unique
	// across the catalog's model names, aliases and adapters.
	Name string `json:"name"`
	// Source of the adapter's file: a local path, or a mirror source
	// (mirror://<model>[/<version>[/<file>]], hf://…, http(s)://…), which is
	// fetched to the node and checked against its sha256 like weights.
	// Required.
	Source string `json:"source"`
	// Scale is how strongly the adapter applies, where the engine can
	// say (llama.cpp; vLLM and Ollama apply adapters at 1). Default: 1.
	Scale float64 `json:"scale,omitempty"`
}

// AdapterOf names the model an adapter's catalog entry applies to; empty
// for a model.
func (m *Model) AdapterOf() string { return m.adapterOf }

// validateAdapters checks a model's adapters on their own; clashes with
// other names are the catalog's to find.
func (m *Model) validateAdapters() error {
	seen := map[string]bool{}
	for _, a := range m.Adapters {
		if a == nil {
			return fmt.Errorf("model %q: an adapter is empty; give it a name and a source", m.Name)
		}
		if err := CheckName(fmt.Sprintf("model %q: adapter name", m.Name), a.Name); err != nil {
			return err
		}
		if seen[a.Name] {
			return fmt.Errorf("model %q: adapter %q is declared twice", m.Name, a.Name)
		}
		seen[a.Name] = true
		if a.Source == "" {
			return fmt.Errorf("model %q: adapter %q: source is required (a path, or mirror://<model>/<version>)", m.Name, a.Name)
		}
		if len(a.Source) > maxSourceLen {
			return fmt.Errorf("model %q: adapter %q: source is %d bytes long; at most %d", m.Name, a.Name, len(a.Source), maxSourceLen)
		}
		if a.Scale < 0 {
			return fmt.Errorf("model %q: adapter %q: scale %g must not be negative", m.Name, a.Name, a.Scale)
		}
	}
	return nil
}

// addAdapters gives each model's adapters a catalog entry of their own: the
// model's settings under the adapter's name, without aliases, fallbacks
// or canary. An adapter's name must be no model's name or alias.
func (c *catalog) addAdapters(models []*Model) error {
	for _, m := range models {
		for _, a := range m.Adapters {
			if prev, dup := c.byName[a.Name]; dup {
				return fmt.Errorf("model %q: adapter name %q is already the name of model %q; give the adapter a name of its own", m.Name, a.Name, prev.Name)
			}
			if prev, dup := c.adapters[a.Name]; dup {
				return fmt.Errorf("model %q: adapter name %q is already an adapter of model %q; give the adapter a name of its own", m.Name, a.Name, prev.adapterOf)
			}
			e := *m
			e.Name, e.adapterOf = a.Name, m.Name
			e.Aliases, e.Fallbacks, e.Canary, e.Adapters = nil, nil, nil, nil
			if c.adapters == nil {
				c.adapters = map[string]*Model{}
			}
			c.adapters[a.Name] = &e
			c.names = append(c.names, a.Name)
		}
	}
	return nil
}

// checkAdapterEngine refuses adapters on a model whose engine cannot load
// them.
func checkAdapterEngine(m *Model, info engine.Info) error {
	if len(m.Adapters) > 0 && !slices.Contains(info.Capabilities, engine.CapAdapters) {
		return fmt.Errorf("model %q: engine %s cannot load adapters; serve the model with an engine that can (llamacpp, vllm, ollama)", m.Name, m.Engine)
	}
	return nil
}

// adapterFleet is the fleet serving an adapter's name, and a selector
// that picks only its replicas that loaded the adapter.
func (a *App) adapterFleet(name string, sel Selector) (*fleet, Selector, bool) {
	v := a.v()
	e, ok := v.cat.adapters[name]
	if !ok {
		return nil, nil, false
	}
	f, ok := v.fleets[e.adapterOf]
	return f, adapterSelector{sel: sel, name: name}, ok
}

// adapterSelector keeps to the replicas that loaded an adapter; with none
// (a replica started before the adapter was declared), the request waits
// for one that has.
type adapterSelector struct {
	sel  Selector
	name string
}

// Select implements Selector.
func (s adapterSelector) Select(ready []*Replica) *Replica {
	with := make([]*Replica, 0, len(ready))
	for _, r := range ready {
		if _, ok := r.Adapters[s.name]; ok {
			with = append(with, r)
		}
	}
	if len(with) == 0 {
		return nil
	}
	return s.sel.Select(with)
}

// AdapterMembers returns the request body members that apply the adapter
// name on r (a JSON object), or nil when name is no adapter r loaded or
// none are needed.
func (r *Replica) AdapterMembers(name string) []byte {
	m := r.Adapters[name]
	if m == "" || m == "{}" {
		return nil
	}
	return []byte(m)
}

// SetMembers sets the members of the JSON object members in the JSON
// object body.
func SetMembers(body, members []byte) ([]byte, error) {
	var b, m map[string]json.RawMessage
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(members, &m); err != nil {
		return nil, fmt.Errorf("an adapter's request members: %w", err)
	}
	for k, v := range m {
		b[k] = v
	}
	return json.Marshal(b)
}

// adaptersNeedMirror says whether an adapter of the models comes through
// the mirror.
func adaptersNeedMirror(models []*Model) bool {
	for _, m := range models {
		for _, a := range m.Adapters {
			if viaMirror(a.Source) {
				return true
			}
		}
	}
	return false
}

func viaMirror(src string) bool {
	return isMirrorSource(src) || strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://")
}

// fetchAdapters brings the model's adapters to the node: mirror sources
// fetched to the node cache and verified, local paths made absolute. It
// returns the adapters for the replica's spec and a release for when the
// replica stops.
func (f *fleet) fetchAdapters(ctx context.Context) ([]engine.Adapter, func(), error) {
	m := f.m()
	if len(m.Adapters) == 0 {
		return nil, func() {}, nil
	}
	var releases []func()
	release := func() {
		for _, r := range releases {
			r()
		}
	}
	out := make([]engine.Adapter, 0, len(m.Adapters))
	for _, a := range m.Adapters {
		path := a.Source
		if viaMirror(a.Source) {
			mr := activeMirror.Load()
			if mr == nil {
				release()
				return nil, nil, fmt.Errorf("model %q: adapter %q: source %s needs the mirror; configure it with a mirror block in the llm app", m.Name, a.Name, mirror.RedactURL(a.Source))
			}
			fe, p, err := resolveSource(ctx, mr, &Model{Name: a.Name, Source: a.Source}, f.logger)
			if err != nil {
				release()
				return nil, nil, fmt.Errorf("model %q: adapter %q: %w", m.Name, a.Name, err)
			}
			releases = append(releases, fe.Release)
			path = p
		} else if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		out = append(out, engine.Adapter{Name: a.Name, Path: path, Scale: a.Scale})
	}
	return out, release, nil
}

// parseAdapter reads one adapter of a model:
//
//	adapter <name> {
//		source <path|mirror://<model>/<version>[/<file>]>
//		scale  <number>
//	}
func parseAdapter(d *caddyfile.Dispenser, m *Model) error {
	a := &Adapter{}
	if !d.Args(&a.Name) || d.NextArg() {
		return d.ArgErr()
	}
	if err := CheckName(fmt.Sprintf("model %q: adapter name", m.Name), a.Name); err != nil {
		return d.Err(err.Error())
	}
	for _, o := range m.Adapters {
		if o.Name == a.Name {
			return d.Errf("model %q: adapter %q is declared twice", m.Name, a.Name)
		}
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "source":
			return caddyfileutil.OneArg(d, &a.Source)
		case "scale":
			var s string
			if err := caddyfileutil.OneArg(d, &s); err != nil {
				return err
			}
			f, err := strconv.ParseFloat(s, 64)
			if err != nil || f <= 0 || math.IsInf(f, 0) {
				return d.Errf("adapter %q: scale %q is not a number above 0, such as 0.5", a.Name, s)
			}
			a.Scale = f
			return nil
		}
		return d.Errf("unrecognized adapter subdirective %q; use source or scale", dir)
	})
	if err != nil {
		return err
	}
	if a.Source == "" {
		return d.Errf("model %q: adapter %q: source is required (a path, or mirror://<model>/<version>)", m.Name, a.Name)
	}
	m.Adapters = append(m.Adapters, a)
	return nil
}

// adaptersSchema is the adapters member of a model in the OpenAPI
// document.
var adaptersSchema = map[string]any{"type": "array", "description": "LoRA adapters, each served under its own name; changing them replaces the replicas without downtime",
	"items": obj(map[string]any{
		"name":   typ("string", "the name clients ask for; no model's or other adapter's"),
		"source": typ("string", "a local path, or mirror://model[/version[/file]] (fetched and checked like weights)"),
		"scale":  typ("number", "default 1; llamacpp only (vllm and ollama apply adapters at 1)"),
	}, "name", "source")}

// withAdapterSources is models and, for each adapter, an entry with the
// adapter's name and source: what uses a file of the node's weights
// directory.
func withAdapterSources(models []*Model) []*Model {
	out := models
	for _, m := range models {
		for _, a := range m.Adapters {
			if len(out) == len(models) {
				out = slices.Clone(models)
			}
			out = append(out, &Model{Name: a.Name, Source: a.Source})
		}
	}
	return out
}

// checkAdapterSources checks the sources of adapters of m as a model's
// source is checked before it is added (unless m opts out): the file or
// mirror version exists and is in a format m's engine (formats) loads.
func (a *App) checkAdapterSources(ctx context.Context, m *Model, adapters []*Adapter, formats []string) error {
	if m.CheckSource != nil && !*m.CheckSource {
		return nil
	}
	for _, ad := range adapters {
		_, err := a.sourceChecker().check(ctx, &Model{Name: ad.Name, Engine: m.Engine, Source: ad.Source}, formats)
		var se *SourceError
		if errors.As(err, &se) {
			return sourceErr("model %q: adapter %q: %s", m.Name, ad.Name, se.msg)
		}
		if err != nil {
			return fmt.Errorf("model %q: adapter %q: %w", m.Name, ad.Name, err)
		}
	}
	return nil
}

// checkNewAdapters checks the sources of adapters a live change gives
// the model name, before anything changes.
func (a *App) checkNewAdapters(ctx context.Context, name string, adapters []*Adapter) error {
	m, ok := a.v().cat.byName[name]
	if !ok {
		return nil // changeModel answers 404
	}
	var formats []string
	if p, ok := a.engines.get(m.Engine); ok {
		formats = p.Info().Formats
	}
	return a.checkAdapterSources(ctx, m, adapters, formats)
}
