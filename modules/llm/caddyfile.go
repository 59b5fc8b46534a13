package llm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/audit"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("llm", parseGlobalOption)
}

// parseGlobalOption sets up the llm app from the global option:
//
//	llm {
//		plugin_dir    <path>
//		hold_timeout  <duration>
//		start_timeout <duration>
//		drain_timeout <duration>
//		max_waiting   <n>
//		update_check  <duration>|off  # how often tracked registry sources are checked (default 6h)
//		engine <type> {
//			path   <executable>
//			sha256 <hex>
//		}
//		model <name> {
//			alias              <name...>
//			engine             <type>
//			source             <path|url>
//			check_source       on|off  # off: a source only the nodes reach (default on)
//			update_check       <duration>|off  # overrides the app's update_check
//			args               <arg...>
//			option             <key> <value>
//			context_length     <tokens>
//			min                <replicas>
//			max                <replicas>  # 0: kept in the catalog, not running
//			idle_timeout       <duration>
//			target_concurrency <requests>
//			fallback           <model...>
//			canary             <model> <percent>%  # a share of requests to another model
//			price              <input> <output>   # per million tokens
//			adapter <name> {                      # a LoRA adapter served as <name>; repeatable
//				source <path|mirror://…>
//				scale  <number>                   # default 1
//			}
//		}
//		org <name> {                            # see parseOrg
//			...
//		}
//		mirror {                                # see MirrorConfig.parse
//			...
//		}
//		audit {                                 # the audit log's bounds
//			keep        <duration>              # default 30d
//			max_entries <n>                     # default 100000
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if existing != nil {
		return nil, d.Err("the llm global option may appear only once")
	}
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	b, err := json.Marshal(app)
	if err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "llm", Value: b}, nil
}

// UnmarshalCaddyfile parses the llm global option; see parseGlobalOption.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "plugin_dir":
			return caddyfileutil.OneArg(d, &a.PluginDir)
		case "hold_timeout":
			return caddyfileutil.DurationArg(d, &a.HoldTimeout)
		case "start_timeout":
			return caddyfileutil.DurationArg(d, &a.StartTimeout)
		case "drain_timeout":
			return caddyfileutil.DurationArg(d, &a.DrainTimeout)
		case "max_waiting":
			return caddyfileutil.IntArg(d, &a.MaxWaiting, 1)
		case "update_check":
			return parseUpdateCheck(d, &a.UpdateCheck) // updates.go
		case "node":
			a.Node = new(catalog.Resources)
			return parseResources(d, a.Node, a)
		case "engine":
			return a.parseEngine(d)
		case "model":
			return a.parseModel(d)
		case "org":
			return a.parseOrg(d)
		case "mirror":
			a.Mirror = new(weights.MirrorConfig)
			return a.Mirror.Parse(d)
		case "cluster":
			a.Cluster = new(ClusterConfig)
			return a.Cluster.parse(d)
		case "audit":
			a.Audit = new(audit.Config)
			return a.Audit.Parse(d)
		case "secret":
			return a.parseSecret(d) // secrets.go
		case "runtime_hosts":
			if !d.NextArg() {
				return d.ArgErr()
			}
			a.RuntimeHosts = append(a.RuntimeHosts, append([]string{d.Val()}, d.RemainingArgs()...)...)
			return nil
		default:
			return d.Errf("unrecognized llm subdirective %q", dir)
		}
	}, "engine", "model", "org", "secret", "runtime_hosts")
}

func (a *App) parseEngine(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	typ := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if _, dup := a.Engines[typ]; dup {
		return d.Errf("engine %q is configured twice", typ)
	}
	ec := new(EngineConfig)
	err := caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "path":
			return caddyfileutil.OneArg(d, &ec.Path)
		case "sha256":
			return caddyfileutil.OneArg(d, &ec.SHA256)
		case "option":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("option takes a name and a value, such as: option bin /usr/local/bin/llama-server")
			}
			if ec.Options == nil {
				ec.Options = map[string]string{}
			}
			ec.Options[args[0]] = args[1]
		default:
			return d.Errf("unrecognized engine subdirective %q", dir)
		}
		return nil
	}, "option")
	if err != nil {
		return err
	}
	if a.Engines == nil {
		a.Engines = make(map[string]*EngineConfig)
	}
	a.Engines[typ] = ec
	return nil
}

func (a *App) parseModel(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	m := &catalog.Model{Name: d.Val()}
	if err := catalog.CheckName("model name", m.Name); err != nil {
		return d.Err(err.Error())
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	err := caddyfileutil.EachSubdirective(d, func(dir string) error { return parseModelField(d, m, dir) }, "option", "alias", "fallback", "adapter")
	if err != nil {
		return err
	}
	if m.Engine == "" {
		return d.Errf("model %q: engine is required", m.Name)
	}
	a.Models = append(a.Models, m)
	return nil
}

func parseModelField(d *caddyfile.Dispenser, m *catalog.Model, dir string) error {
	sc := func() *catalog.Scaling {
		if m.Scaling == nil {
			m.Scaling = new(catalog.Scaling)
		}
		return m.Scaling
	}
	switch dir {
	case "alias":
		if err := caddyfileutil.ManyArgs(d, &m.Aliases); err != nil {
			return err
		}
		for _, al := range m.Aliases {
			if err := catalog.CheckName(fmt.Sprintf("model %q: alias", m.Name), al); err != nil {
				return d.Err(err.Error())
			}
		}
		return nil
	case "engine":
		return caddyfileutil.OneArg(d, &m.Engine)
	case "source":
		return caddyfileutil.OneArg(d, &m.Source)
	case "update_check":
		return parseUpdateCheck(d, &m.UpdateCheck) // updates.go
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
		var k, v string
		if !d.Args(&k, &v) || d.NextArg() {
			return d.ArgErr()
		}
		if _, dup := m.Options[k]; dup {
			return d.Errf("option %q is set twice", k)
		}
		if m.Options == nil {
			m.Options = make(map[string]string)
		}
		m.Options[k] = v
		return nil
	case "context_length":
		var n int
		err := caddyfileutil.IntArg(d, &n, 1)
		m.ContextLength = int64(n)
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
		m.Resources = new(catalog.Resources)
		return parseResources(d, m.Resources, nil)
	case "class":
		return caddyfileutil.OneArg(d, &m.Class)
	case "owner":
		return caddyfileutil.OneArg(d, &m.Owner)
	case "adapter":
		return parseAdapter(d, m)
	case "canary":
		var model, share string
		if !d.Args(&model, &share) || d.NextArg() {
			return d.ArgErr()
		}
		pct, err := strconv.ParseFloat(strings.TrimSuffix(share, "%"), 64)
		if err != nil || !strings.HasSuffix(share, "%") || pct < 0 || pct > 100 {
			return d.Errf("canary share %q is not a percentage such as 10%%", share)
		}
		m.Canary = &catalog.Canary{Model: model, Share: pct / 100}
		return nil
	}
	return d.Errf("unrecognized model subdirective %q", dir)
}

// parseResources reads a block of memory <size>, cores <n>, gpus <n>, and
// for the node (a non-nil) pin_cores and gpu_devices <i,j,…>.
func parseResources(d *caddyfile.Dispenser, r *catalog.Resources, a *App) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "memory":
			var s string
			if err := caddyfileutil.OneArg(d, &s); err != nil {
				return err
			}
			n, err := humanize.ParseBytes(s)
			if err != nil {
				return d.Errf("memory %q is not a size such as 8GiB", s)
			}
			r.Memory = int64(n)
		case "cores":
			if err := caddyfileutil.IntArg(d, &r.Cores, 0); err != nil {
				return err
			}
		case "gpus":
			if err := caddyfileutil.IntArg(d, &r.GPUs, 0); err != nil {
				return err
			}
		case "pin_cores":
			if a == nil {
				return d.Err("pin_cores belongs in the node block: it pins every model's replicas that say how many cores they need")
			}
			if d.NextArg() {
				return d.ArgErr()
			}
			a.PinCores = true
		case "gpu_devices":
			if a == nil {
				return d.Err("gpu_devices belongs in the node block: it names the node's GPUs; a model says how many it needs with gpus <n>")
			}
			if err := parseGPUDevices(d, &a.GPUDevices); err != nil { // gpus.go
				return err
			}
		default:
			if a != nil {
				return d.Errf("unrecognized node subdirective %q; use memory, cores, gpus, gpu_devices or pin_cores", d.Val())
			}
			return d.Errf("unrecognized resources subdirective %q; use memory, cores or gpus", d.Val())
		}
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*App)(nil)
