package catalog

import (
	"fmt"
	"slices"

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

// ValidateAdapters checks a model's adapters on their own; clashes with
// other names are the catalog's to find.
func (m *Model) ValidateAdapters() error {
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

// AddAdapters gives each model's adapters a catalog entry of their own: the
// model's settings under the adapter's name, without aliases, fallbacks
// or canary. An adapter's name must be no model's name or alias.
func (c *Catalog) AddAdapters(models []*Model) error {
	for _, m := range models {
		for _, a := range m.Adapters {
			if prev, dup := c.ByName[a.Name]; dup {
				return fmt.Errorf("model %q: adapter name %q is already the name of model %q; give the adapter a name of its own", m.Name, a.Name, prev.Name)
			}
			if prev, dup := c.Adapters[a.Name]; dup {
				return fmt.Errorf("model %q: adapter name %q is already an adapter of model %q; give the adapter a name of its own", m.Name, a.Name, prev.adapterOf)
			}
			e := *m
			e.Name, e.adapterOf = a.Name, m.Name
			e.Aliases, e.Fallbacks, e.Canary, e.Adapters = nil, nil, nil, nil
			if c.Adapters == nil {
				c.Adapters = map[string]*Model{}
			}
			c.Adapters[a.Name] = &e
			c.Names = append(c.Names, a.Name)
		}
	}
	return nil
}

// CheckAdapterEngine refuses adapters on a model whose engine cannot load
// them.
func CheckAdapterEngine(m *Model, info engine.Info) error {
	if len(m.Adapters) > 0 && !slices.Contains(info.Capabilities, engine.CapAdapters) {
		return fmt.Errorf("model %q: engine %s cannot load adapters; serve the model with an engine that can (llamacpp, vllm, ollama)", m.Name, m.Engine)
	}
	return nil
}
