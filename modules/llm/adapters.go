package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/weights"
	"github.com/llmgw/llmgw/plugins/engine"
)

// adapterFleet is the fleet serving an adapter's name, and a selector
// that picks only its replicas that loaded the adapter.
func (a *App) adapterFleet(name string, sel Selector) (*fleet, Selector, bool) {
	v := a.v()
	e, ok := v.cat.Adapters[name]
	if !ok {
		return nil, nil, false
	}
	f, ok := v.fleets[e.AdapterOf()]
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
		if weights.ViaMirror(a.Source) {
			mr := activeMirror.Load()
			if mr == nil {
				release()
				return nil, nil, fmt.Errorf("model %q: adapter %q: source %s needs the mirror; configure it with a mirror block in the llm app", m.Name, a.Name, mirror.RedactURL(a.Source))
			}
			fe, p, err := weights.ResolveSource(ctx, mr, &catalog.Model{Name: a.Name, Source: a.Source}, f.logger)
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
func parseAdapter(d *caddyfile.Dispenser, m *catalog.Model) error {
	a := &catalog.Adapter{}
	if !d.Args(&a.Name) || d.NextArg() {
		return d.ArgErr()
	}
	if err := catalog.CheckName(fmt.Sprintf("model %q: adapter name", m.Name), a.Name); err != nil {
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

// checkAdapterSources checks the sources of adapters of m as a model's
// source is checked before it is added (unless m opts out): the file or
// mirror version exists and is in a format m's engine (formats) loads.
func (a *App) checkAdapterSources(ctx context.Context, m *catalog.Model, adapters []*catalog.Adapter, formats []string) error {
	if m.CheckSource != nil && !*m.CheckSource {
		return nil
	}
	for _, ad := range adapters {
		_, err := a.sourceChecker().Check(ctx, &catalog.Model{Name: ad.Name, Engine: m.Engine, Source: ad.Source}, formats)
		var se *weights.SourceError
		if errors.As(err, &se) {
			return weights.SourceErrorf("model %q: adapter %q: %s", m.Name, ad.Name, se)
		}
		if err != nil {
			return fmt.Errorf("model %q: adapter %q: %w", m.Name, ad.Name, err)
		}
	}
	return nil
}

// checkNewAdapters checks the sources of adapters a live change gives
// the model name, before anything changes.
func (a *App) checkNewAdapters(ctx context.Context, name string, adapters []*catalog.Adapter) error {
	m, ok := a.v().cat.ByName[name]
	if !ok {
		return nil // changeModel answers 404
	}
	var formats []string
	if p, ok := a.engines.get(m.Engine); ok {
		formats = p.Info().Formats
	}
	return a.checkAdapterSources(ctx, m, adapters, formats)
}
