package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/weights"
	"github.com/llmgw/llmgw/plugins/engine"
)

// AdapterSelector keeps to the replicas that loaded an adapter; with none
// (a replica started before the adapter was declared), the request waits
// for one that has.
type AdapterSelector struct {
	sel  Selector
	name string
}

// Select implements Selector.
func (s AdapterSelector) Select(ready []*Replica) *Replica {
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
func (f *Fleet) fetchAdapters(ctx context.Context) ([]engine.Adapter, func(), error) {
	m := f.Model()
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
			mr := f.opts.Node.Mirror()
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
