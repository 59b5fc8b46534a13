package llm

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// adapterFleet is the fleet serving an adapter's name, and a selector
// that picks only its replicas that loaded the adapter.
func (a *App) adapterFleet(name string, sel fleet.Selector) (*fleet.Fleet, fleet.Selector, bool) {
	v := a.v()
	e, ok := v.cat.Adapters[name]
	if !ok {
		return nil, nil, false
	}
	f, ok := v.fleets[e.AdapterOf()]
	return f, fleet.NewAdapterSelector(sel, name), ok
}

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
	if p, ok := a.engines.Get(m.Engine); ok {
		formats = p.Info().Formats
	}
	return a.checkAdapterSources(ctx, m, adapters, formats)
}
