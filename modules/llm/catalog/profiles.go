package catalog

import (
	"fmt"
	"maps"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Profile is one shape a model's replicas can take: the engine that
// serves them and what one replica needs from the node. A model with
// profiles has each replica placed on the first profile the node has
// room for (see Model.Profiles); what a profile leaves unset it takes
// from the model.
type Profile struct {
	// Name of the profile, such as gpu or cpu: shown for each replica,
	// in plans and in the access log. Required; unique in the model.
	Name string `json:"name"`
	// Engine serving the profile's replicas. Default: the model's.
	Engine string `json:"engine,omitempty"`
	// Source of the weights for this engine (an engine that loads GGUF
	// files, another safetensors). Default: the model's.
	Source string `json:"source,omitempty"`
	// Args for the engine server. Default: the model's.
	Args []string `json:"args,omitempty"`
	// Options for the engine, laid over the model's.
	Options map[string]string `json:"options,omitempty"`
	// ContextLength of the profile's replicas. Default: the model's.
	ContextLength int64 `json:"context_length,omitempty"`
	// Resources one replica of the profile needs (memory, cores, GPUs).
	// A profile that needs no GPU is a CPU profile. Default: the model's.
	Resources *Resources `json:"resources,omitempty"`

	// resolved are Source and Options as the engine gets them (the config
	// file's placeholders resolved; see Resolve).
	resolved *EngineValues
}

// PreferCPU is the model's prefer value that lets a CPU profile take a
// replica while the node's GPUs are free.
const PreferCPU = "cpu"

// Shapes is how many shapes the model's replicas can take: its profiles,
// or one (the model itself) when it has none.
func (m *Model) Shapes() int { return max(1, len(m.Profiles)) }

// Shape is the model as its replicas of profile i run: the profile's
// engine, source, args, options and resources over the model's. A model
// without profiles is its own only shape.
func (m *Model) Shape(i int) *Model {
	if len(m.Profiles) == 0 {
		return m
	}
	p := m.Profiles[min(max(i, 0), len(m.Profiles)-1)]
	s := *m
	s.Profiles, s.profile = nil, p.Name
	if p.Engine != "" {
		s.Engine = p.Engine
	}
	if p.Source != "" {
		s.Source = p.Source
	}
	if p.Args != nil {
		s.Args = p.Args
	}
	if p.ContextLength > 0 {
		s.ContextLength = p.ContextLength
	}
	if p.Resources != nil {
		s.Resources = p.Resources
	}
	if len(p.Options) > 0 {
		s.Options = maps.Clone(m.Options)
		if s.Options == nil {
			s.Options = map[string]string{}
		}
		maps.Copy(s.Options, p.Options)
	}
	r := p.resolved
	if r == nil { // not resolved (a model checked before it runs): as given
		r = &EngineValues{Source: p.Source, Options: p.Options}
	}
	ev := &EngineValues{Source: m.EngineSource(), Options: m.EngineOptions()}
	if p.Source != "" {
		ev.Source = r.Source
	}
	if len(r.Options) > 0 {
		ev.Options = maps.Clone(ev.Options)
		if ev.Options == nil {
			ev.Options = map[string]string{}
		}
		maps.Copy(ev.Options, r.Options)
	}
	s.EngineVals = ev
	return &s
}

// ProfileIndex is the index of the model's profile name, 0 when it has
// none of that name.
func (m *Model) ProfileIndex(name string) int {
	for i, p := range m.Profiles {
		if p.Name == name {
			return i
		}
	}
	return 0
}

// ProfileName is the profile a shape (see Shape) was made from: "" for
// a model without profiles.
func (m *Model) ProfileName() string { return m.profile }

// GPUProfileNeed is the fewest GPUs one of the model's profiles needs,
// 0 when none needs any: while the node has that many free, a CPU
// profile does not take a replica unless the model prefers the CPU.
func (m *Model) GPUProfileNeed() int {
	least := 0
	for i := range m.Profiles {
		if g := m.Shape(i).Needs().GPUs; g > 0 && (least == 0 || g < least) {
			least = g
		}
	}
	return least
}

// Resolve sets the profile's source and options as its engine gets them,
// each config-file value through value (which resolves placeholders). It
// runs once per profile: a published profile is not written again.
func (p *Profile) Resolve(value func(what, v string) (string, error)) error {
	if p.resolved != nil {
		return nil
	}
	ev := &EngineValues{Options: make(map[string]string, len(p.Options))}
	var err error
	if p.Source != "" {
		if ev.Source, err = value("profile "+p.Name+": source", p.Source); err != nil {
			return err
		}
	}
	for k, v := range p.Options {
		if ev.Options[k], err = value("profile "+p.Name+": option "+k, v); err != nil {
			return err
		}
	}
	p.resolved = ev
	return nil
}

// checkProfiles checks the model's profiles and prefer.
func (m *Model) checkProfiles() error {
	switch m.Prefer {
	case "", PreferCPU:
	default:
		return fmt.Errorf("model %q: prefer %s: the one choice is cpu (a CPU profile may take a replica while GPUs are free)", m.Name, Bounded(m.Prefer))
	}
	if m.Prefer != "" && len(m.Profiles) == 0 {
		return fmt.Errorf("model %q: prefer cpu applies to a model's profiles; declare them (profile gpu {…} and profile cpu {…})", m.Name)
	}
	seen := map[string]bool{}
	for i, p := range m.Profiles {
		if err := CheckName(fmt.Sprintf("model %q: profile name", m.Name), p.Name); err != nil {
			return err
		}
		if seen[p.Name] {
			return fmt.Errorf("model %q: profile %q is declared twice", m.Name, p.Name)
		}
		seen[p.Name] = true
		s := m.Shape(i)
		if s.Engine == "" {
			return fmt.Errorf("model %q: profile %q has no engine; give it one, or the model one", m.Name, p.Name)
		}
		if err := CheckEngineType(m.Name, s.Engine); err != nil {
			return err
		}
		if s.Engine == "openai" || s.Engine == "anthropic" {
			return fmt.Errorf("model %q: profile %q: engine %s serves from an outside provider, which needs no room on a node; declare it as a provider block instead", m.Name, p.Name, s.Engine)
		}
		if r := p.Resources; r != nil && (r.Memory < 0 || r.Cores < 0 || r.GPUs < 0) {
			return fmt.Errorf("model %q: profile %q: resources must not be negative", m.Name, p.Name)
		}
		if err := s.CheckSizes(); err != nil {
			return err
		}
		if err := s.CheckMaxOutput(); err != nil {
			return err
		}
	}
	return nil
}

// CheckShape checks a shape of a model (see Shape) against its engine:
// the weights it loads, the options and args it takes.
func CheckShape(s *Model, info engine.Info) error {
	err := CheckFormat(s, info.Formats)
	if err == nil {
		err = CheckEngineSettings(s, info)
	}
	if err != nil && s.ProfileName() != "" {
		return fmt.Errorf("%w (profile %s)", err, s.ProfileName())
	}
	return err
}

// parseProfile reads one profile of a model:
//
//	profile <name> {
//		engine         <type>
//		source         <path|url>
//		args           <arg...>
//		option         <name> <value>
//		context_length <tokens>
//		memory         <size>
//		cores          <n>
//		gpus           <n>
//	}
func parseProfile(d *caddyfile.Dispenser, m *Model) error {
	p := &Profile{}
	if !d.Args(&p.Name) || d.NextArg() {
		return d.ArgErr()
	}
	for _, o := range m.Profiles {
		if o.Name == p.Name {
			return d.Errf("model %q: profile %q is declared twice", m.Name, p.Name)
		}
	}
	res := func() *Resources {
		if p.Resources == nil {
			p.Resources = new(Resources)
		}
		return p.Resources
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "engine":
			return caddyfileutil.OneArg(d, &p.Engine)
		case "source":
			return caddyfileutil.OneArg(d, &p.Source)
		case "args":
			return caddyfileutil.ManyArgs(d, &p.Args)
		case "option":
			return parseOption(d, &p.Options)
		case "context_length":
			var n int
			err := caddyfileutil.IntArg(d, &n, 1)
			p.ContextLength = int64(n)
			return err
		case "memory":
			return caddyfileutil.SizeArg(d, &res().Memory, "memory", "16GiB")
		case "cores":
			return caddyfileutil.IntArg(d, &res().Cores, 0)
		case "gpus":
			return caddyfileutil.IntArg(d, &res().GPUs, 0)
		}
		return d.Errf("unrecognized profile subdirective %q; use engine, source, args, option, context_length, memory, cores or gpus", dir)
	}, "option")
	if err != nil {
		return err
	}
	m.Profiles = append(m.Profiles, p)
	return nil
}

// parseOption reads option <name> <value> into opts.
func parseOption(d *caddyfile.Dispenser, opts *map[string]string) error {
	var k, v string
	if !d.Args(&k, &v) || d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := (*opts)[k]; dup {
		return d.Errf("option %q is set twice", k)
	}
	if *opts == nil {
		*opts = make(map[string]string)
	}
	(*opts)[k] = v
	return nil
}
