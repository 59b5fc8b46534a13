// Package presets is the catalog's presets: curated model definitions,
// each a model as the catalog takes it (its engine, source, options, the
// resources it needs, its licence) plus the ComfyUI workflows that use
// it, added with one command (llmgw ctl model add --preset NAME). Some
// ship with llmgw; the operator adds their own in the config file, and
// one of the operator's replaces a shipped one of the same name. A preset
// marked automatic is added when the cluster can run it; one an operator
// removed is remembered as declined and not added again.
//
// The package holds no Caddy app: the llm app hands a Service its Host.
package presets

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// Preset is one curated model definition.
type Preset struct {
	// Name of the preset, and of the model it adds unless the add names
	// another.
	Name string `json:"name"`
	// Description says what the model does and what it needs.
	Description string `json:"description,omitempty"`
	// Kind is what the model makes: chat, embeddings, image, 3d or
	// workflow.
	Kind string `json:"kind,omitempty"`
	// Model is the model it adds, in the shape of the config's
	// apps.llm.models (its name defaults to the preset's): its resources
	// are the hardware it needs, its licence the terms it is served
	// under, its workflows those that use it.
	Model catalog.Model `json:"model"`
	// Automatic presets are added by themselves when the cluster can
	// run them, unless an operator declined them (removed the model).
	Automatic bool `json:"automatic,omitempty"`
}

// kinds are the kinds a preset may have.
var kinds = []string{"chat", "embeddings", "image", "3d", "workflow"}

// Check checks the preset and its model against the catalog's rules.
func (p *Preset) Check() error {
	if err := catalog.CheckName("preset name", p.Name); err != nil {
		return err
	}
	if p.Kind != "" && !slices.Contains(kinds, p.Kind) {
		return fmt.Errorf("preset %s: kind %s: use %s", p.Name, catalog.Bounded(p.Kind), strings.Join(kinds, ", "))
	}
	m := p.ModelNamed("")
	if m.Engine == "" {
		return fmt.Errorf("preset %s: its model has no engine", p.Name)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("preset %s: %w", p.Name, err)
	}
	return nil
}

// ModelNamed is a fresh copy of the preset's model called name (the
// preset's name when empty), marked as added from the preset.
func (p *Preset) ModelNamed(name string) *catalog.Model {
	b, _ := json.Marshal(p.Model)
	m := new(catalog.Model)
	_ = json.Unmarshal(b, m)
	m.Name = name
	if m.Name == "" {
		m.Name = p.Name
	}
	m.Preset = p.Name
	return m
}

//go:embed shipped.json
var shippedJSON []byte

// Shipped are the presets that ship with llmgw, parsed anew at each call.
func Shipped() []*Preset {
	var ps []*Preset
	if err := json.Unmarshal(shippedJSON, &ps); err != nil {
		panic("presets: shipped.json: " + err.Error())
	}
	return ps
}

// Merge lists the shipped presets and the operator's, sorted by name;
// one of the operator's replaces a shipped one of the same name.
func Merge(shipped, own []*Preset) []*Preset {
	byName := map[string]*Preset{}
	for _, p := range shipped {
		byName[p.Name] = p
	}
	for _, p := range own {
		byName[p.Name] = p
	}
	out := make([]*Preset, 0, len(byName))
	for _, p := range byName {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Preset) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Decline is a preset an operator removed: not added again by itself.
type Decline struct {
	Preset string    `json:"preset"`
	Model  string    `json:"model"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at"`
}

// Declines are the declined presets, as kept in storage.
type Declines []Decline

// ParseDeclines reads declines kept in storage (none for nil).
func ParseDeclines(b []byte) (Declines, error) {
	var d Declines
	if len(b) == 0 {
		return d, nil
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("the declined presets in storage are corrupt: %w", err)
	}
	return d, nil
}

// Has reports whether preset was declined.
func (d Declines) Has(preset string) bool {
	return slices.ContainsFunc(d, func(x Decline) bool { return x.Preset == preset })
}

// With is d with x, replacing an earlier decline of its preset.
func (d Declines) With(x Decline) Declines {
	return append(d.Without(x.Preset), x)
}

// Without is d without preset's decline.
func (d Declines) Without(preset string) Declines {
	return slices.DeleteFunc(slices.Clone(d), func(x Decline) bool { return x.Preset == preset })
}
