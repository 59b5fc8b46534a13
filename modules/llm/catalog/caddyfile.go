package catalog

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

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

// ParseModelField reads one subdirective dir of a model block into m.
func ParseModelField(d *caddyfile.Dispenser, m *Model, dir string) error {
	sc := func() *Scaling {
		if m.Scaling == nil {
			m.Scaling = new(Scaling)
		}
		return m.Scaling
	}
	switch dir {
	case "alias":
		if err := caddyfileutil.ManyArgs(d, &m.Aliases); err != nil {
			return err
		}
		for _, al := range m.Aliases {
			if err := CheckName(fmt.Sprintf("model %q: alias", m.Name), al); err != nil {
				return d.Err(err.Error())
			}
		}
		return nil
	case "engine":
		return caddyfileutil.OneArg(d, &m.Engine)
	case "source":
		return caddyfileutil.OneArg(d, &m.Source)
	case "update_check":
		return ParseUpdateCheck(d, &m.UpdateCheck) // updates.go
	case "check_source":
		var v string
		if err := caddyfileutil.OneArg(d, &v); err != nil {
			return err
		}
		switch v {
		case "on":
			m.CheckSource = nil
		case "off":
			m.CheckSource = new(bool)
		default:
			return d.Errf("model %q: check_source %q: use on or off", m.Name, v)
		}
		return nil
	case "args":
		return caddyfileutil.ManyArgs(d, &m.Args)
	case "option":
		return parseOption(d, &m.Options) // profiles.go
	case "profile":
		return parseProfile(d, m) // profiles.go
	case "prefer":
		return caddyfileutil.OneArg(d, &m.Prefer)
	case "licence", "license":
		return parseLicence(d, m) // licence.go
	case "workflow":
		return parseWorkflow(d, m) // workflow.go
	case "context_length":
		var n int
		err := caddyfileutil.IntArg(d, &n, 1)
		m.ContextLength = int64(n)
		return err
	case "max_output":
		var n int
		err := caddyfileutil.IntArg(d, &n, 1)
		m.MaxOutput = int64(n)
		return err
	case "min":
		var n int
		if err := caddyfileutil.IntArg(d, &n, 0); err != nil {
			return err
		}
		sc().Min = &n
		return nil
	case "max":
		var n int
		if err := caddyfileutil.IntArg(d, &n, 0); err != nil {
			return err
		}
		sc().Max = &n
		return nil
	case "idle_timeout":
		return caddyfileutil.DurationArg(d, &sc().IdleTimeout)
	case "target_concurrency":
		return caddyfileutil.IntArg(d, &sc().TargetConcurrency, 1)
	case "fallback":
		return caddyfileutil.ManyArgs(d, &m.Fallbacks)
	case "price":
		return parsePrice(d, m)
	case "resources":
		m.Resources = new(Resources)
		return ParseResources(d, m.Resources, nil)
	case "class":
		return caddyfileutil.OneArg(d, &m.Class)
	case "owner":
		return caddyfileutil.OneArg(d, &m.Owner)
	case "adapter":
		return parseAdapter(d, m)
	case "provider":
		return parseProvider(d, m) // providers.go
	case "policy", "latency_objective", "explore":
		return parseRouting(d, m, dir)
	case "canary":
		var model, share string
		if !d.Args(&model, &share) || d.NextArg() {
			return d.ArgErr()
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(share, "%"), 64)
		if err != nil || !strings.HasSuffix(share, "%") || pct < 0 || pct > 100 {
			return d.Errf("canary share %q is not a percentage such as 10%%", share)
		}
		m.Canary = &Canary{Model: model, Share: pct / 100}
		return nil
	}
	return d.Errf("unrecognized model subdirective %q", dir)
}

// parseResourcesBlock reads a block of memory <size>, cores <n>, gpus
// <n>; node (nil in a model's block) reads the node block's pin_cores and
// gpu_devices.
func ParseResources(d *caddyfile.Dispenser, r *Resources, node func(dir string) error) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch dir := d.Val(); dir {
		case "memory":
			if err := caddyfileutil.SizeArg(d, &r.Memory, "memory", "8GiB"); err != nil {
				return err
			}
		case "cores":
			if err := caddyfileutil.IntArg(d, &r.Cores, 0); err != nil {
				return err
			}
		case "gpus":
			if err := caddyfileutil.IntArg(d, &r.GPUs, 0); err != nil {
				return err
			}
		case "pin_cores", "gpu_devices":
			if node == nil {
				return d.Err(nodeOnly(dir))
			}
			if err := node(dir); err != nil {
				return err
			}
		default:
			if node != nil {
				return d.Errf("unrecognized node subdirective %q; use memory, cores, gpus, gpu_devices or pin_cores", dir)
			}
			return d.Errf("unrecognized resources subdirective %q; use memory, cores or gpus", dir)
		}
	}
	return nil
}

// nodeOnly says why a node subdirective is refused in a model's block.
func nodeOnly(dir string) string {
	if dir == "pin_cores" {
		return "pin_cores belongs in the node block: it pins every model's replicas that say how many cores they need"
	}
	return "gpu_devices belongs in the node block: it names the node's GPUs; a model says how many it needs with gpus <n>"
}

// parsePrice parses a model's "price <input> <output>" (per million tokens).
func parsePrice(d *caddyfile.Dispenser, m *Model) error {
	var in, out string
	if !d.Args(&in, &out) || d.NextArg() {
		return d.ArgErr()
	}
	pi, err1 := strconv.ParseFloat(in, 64)
	po, err2 := strconv.ParseFloat(out, 64)
	if err1 != nil || err2 != nil || pi < 0 || po < 0 {
		return d.Errf("price %s %s: give the input and output price per million tokens, such as 0.15 0.60", in, out)
	}
	m.Price = &Price{InputPerMillion: pi, OutputPerMillion: po}
	return nil
}

// ParseUpdateCheck parses update_check <duration>|off.
func ParseUpdateCheck(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	var s string
	if err := caddyfileutil.OneArg(d, &s); err != nil {
		return err
	}
	if s == "off" {
		*dst = -1
		return nil
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur <= 0 {
		return d.Errf("update_check %q: use a duration such as 6h, or off", s)
	}
	*dst = caddy.Duration(dur)
	return nil
}
