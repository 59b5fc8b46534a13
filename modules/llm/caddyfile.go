package llm

import (
	"encoding/json"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/audit"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/federation"
	"github.com/llmgw/llmgw/modules/llm/place"
	"github.com/llmgw/llmgw/modules/llm/presets"
	"github.com/llmgw/llmgw/modules/llm/reqlog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
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
//			max_output         <tokens>  # the most tokens one answer may have
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
//			workflow <name> <file.json>         # a ComfyUI workflow; see catalog.Workflow
//		}
//		preset <name> {                         # the operator's preset; see presets.Parse
//			...
//		}
//		org <name> {                            # see tenancy.ParseOrg
//			...
//		}
//		mirror {                                # see MirrorConfig.parse
//			...
//		}
//		peer <name> {                           # another gateway's models; see federation.Peer
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
			return catalog.ParseUpdateCheck(d, &a.UpdateCheck) // updates.go
		case "node":
			a.Node = new(catalog.Resources)
			return parseResources(d, a.Node, a)
		case "engine":
			return a.parseEngine(d)
		case "model":
			return a.parseModel(d)
		case "preset":
			p, err := presets.Parse(d)
			a.Presets = append(a.Presets, p)
			return err
		case "org":
			return tenancy.ParseOrg(d, func(o *tenancy.Org) { a.Orgs = append(a.Orgs, o) })
		case "mirror":
			a.Mirror = new(weights.MirrorConfig)
			return a.Mirror.Parse(d)
		case "cluster":
			a.Cluster = new(cluster.ClusterConfig)
			return a.Cluster.Parse(d)
		case "audit":
			a.Audit = new(audit.Config)
			return a.Audit.Parse(d)
		case "secret":
			return a.parseSecret(d) // secrets.go
		case "peer":
			a.Peers = append(a.Peers, new(federation.Peer))
			return a.Peers[len(a.Peers)-1].UnmarshalCaddyfile(d)
		case "request_log":
			a.RequestLog = new(reqlog.Config)
			return a.RequestLog.UnmarshalCaddyfile(d)
		case "runtime_hosts":
			if !d.NextArg() {
				return d.ArgErr()
			}
			a.RuntimeHosts = append(a.RuntimeHosts, append([]string{d.Val()}, d.RemainingArgs()...)...)
			return nil
		default:
			return d.Errf("unrecognized llm subdirective %q", dir)
		}
	}, "engine", "model", "org", "secret", "runtime_hosts", "peer", "preset")
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
	err := caddyfileutil.EachSubdirective(d, func(dir string) error { return catalog.ParseModelField(d, m, dir) }, "option", "alias", "fallback", "adapter", "provider", "profile", "workflow")
	if err != nil {
		return err
	}
	extra, err := catalog.ExpandProviders(m) // providers.go
	if err != nil {
		return d.Err(err.Error())
	}
	if m.Engine == "" && len(m.Profiles) == 0 { // else the first profile's
		return d.Errf("model %q: engine is required (or a provider block or profile with one)", m.Name)
	}
	if err := m.CheckMaxOutput(); err != nil {
		return d.Err(err.Error())
	}
	a.Models = append(a.Models, m)
	a.Models = append(a.Models, extra...)
	return nil
}

// parseResources reads a block of memory <size>, cores <n>, gpus <n>, and
// for the node (a non-nil) pin_cores and gpu_devices <i,j,…>.
func parseResources(d *caddyfile.Dispenser, r *catalog.Resources, a *App) error {
	if a == nil {
		return catalog.ParseResources(d, r, nil)
	}
	return catalog.ParseResources(d, r, func(dir string) error {
		if dir == "pin_cores" {
			if d.NextArg() {
				return d.ArgErr()
			}
			a.PinCores = true
			return nil
		}
		return place.ParseGPUDevices(d, &a.GPUDevices)
	})
}

// Interface guards
var _ caddyfile.Unmarshaler = (*App)(nil)
