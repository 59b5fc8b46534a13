package llm

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// parseOrg parses an organisation of the tenancy tree:
//
//	org <name> {
//		<limits>
//		capacity {
//			memory   <size>
//			cores    <n>
//			gpus     <n>
//			replicas <n>
//		}
//		team <name> {
//			<limits>
//			capacity { … }
//			project <name> {
//				<limits>
//				capacity { … }
//				key <id> <sha256> [{
//					<limits>
//				}]
//			}
//		}
//	}
//
// where <limits> are any of
//
//	requests_per_minute <n>
//	tokens_per_minute   <n>
//	tokens_per_day      <n>
//	budget              <amount> [day|month]
//	max_concurrent      <n>
//	models              <name|glob...>
//	tools               <server.tool|glob...>
//	tool_calls_per_minute <n>
//	tool_calls_per_day    <n>
func (a *App) parseOrg(d *caddyfile.Dispenser) error {
	o := new(tenancy.Org)
	if err := caddyfileutil.NameArg(d, &o.Name); err != nil {
		return err
	}
	return parseNode(d, &o.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, parseCapacity(d, &o.Capacity)
		}
		if dir != "team" {
			return false, nil
		}
		t := new(tenancy.Team)
		o.Teams = append(o.Teams, t)
		return true, parseTeam(d, t)
	}, func() { a.Orgs = append(a.Orgs, o) })
}

func parseTeam(d *caddyfile.Dispenser, t *tenancy.Team) error {
	if err := caddyfileutil.NameArg(d, &t.Name); err != nil {
		return err
	}
	return parseNode(d, &t.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, parseCapacity(d, &t.Capacity)
		}
		if dir != "project" {
			return false, nil
		}
		p := new(tenancy.Project)
		t.Projects = append(t.Projects, p)
		return true, parseProject(d, p)
	}, func() {})
}

func parseProject(d *caddyfile.Dispenser, p *tenancy.Project) error {
	if err := caddyfileutil.NameArg(d, &p.Name); err != nil {
		return err
	}
	return parseNode(d, &p.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, parseCapacity(d, &p.Capacity)
		}
		if dir != "key" {
			return false, nil
		}
		k := new(tenancy.APIKey)
		if !d.Args(&k.ID, &k.SHA256) || d.NextArg() {
			return true, d.ArgErr()
		}
		p.Keys = append(p.Keys, k)
		return true, parseNode(d, &k.Limits, func(string) (bool, error) { return false, nil }, func() {})
	}, func() {})
}

// parseCapacity parses a level's capacity block (memory, cores, gpus,
// replicas); a second block on one level is refused.
func parseCapacity(d *caddyfile.Dispenser, dst **tenancy.Capacity) error {
	if *dst != nil {
		return d.Err("duplicate subdirective \"capacity\"")
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	c := new(tenancy.Capacity)
	*dst = c
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "memory":
			var s string
			if err := caddyfileutil.OneArg(d, &s); err != nil {
				return err
			}
			n, err := humanize.ParseBytes(s)
			if err != nil {
				return d.Errf("memory %q is not a size such as 64GiB", s)
			}
			c.Memory = int64(n)
		case "cores":
			if err := caddyfileutil.IntArg(d, &c.Cores, 1); err != nil {
				return err
			}
		case "gpus":
			if err := caddyfileutil.IntArg(d, &c.GPUs, 1); err != nil {
				return err
			}
		case "replicas":
			if err := caddyfileutil.IntArg(d, &c.Replicas, 1); err != nil {
				return err
			}
		default:
			return d.Errf("unrecognized capacity subdirective %q; use memory, cores, gpus or replicas", d.Val())
		}
	}
	return nil
}

// parseNode parses a block of limits and children; child handles the
// subdirectives limits do not know.
func parseNode(d *caddyfile.Dispenser, lp **tenancy.Limits, child func(dir string) (bool, error), done func()) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		ok, err := child(dir)
		if ok {
			if err != nil {
				return err
			}
			continue
		}
		if seen[dir] {
			return d.Errf("duplicate subdirective %q", dir)
		}
		seen[dir] = true
		if *lp == nil {
			*lp = new(tenancy.Limits)
		}
		if err := parseLimit(d, *lp, dir); err != nil {
			return err
		}
	}
	done()
	return nil
}

func parseLimit(d *caddyfile.Dispenser, l *tenancy.Limits, dir string) error {
	i64 := func(dst *int64) error {
		var n int
		err := caddyfileutil.IntArg(d, &n, 1)
		*dst = int64(n)
		return err
	}
	switch dir {
	case "requests_per_minute":
		return i64(&l.RequestsPerMinute)
	case "tokens_per_minute":
		return i64(&l.TokensPerMinute)
	case "tokens_per_day":
		return i64(&l.TokensPerDay)
	case "max_concurrent":
		return i64(&l.MaxConcurrent)
	case "models":
		return caddyfileutil.ManyArgs(d, &l.Models)
	case "tools":
		return caddyfileutil.ManyArgs(d, &l.Tools)
	case "tool_calls_per_minute":
		return i64(&l.ToolCallsPerMinute)
	case "tool_calls_per_day":
		return i64(&l.ToolCallsPerDay)
	case "budget":
		args := d.RemainingArgs()
		if len(args) < 1 || len(args) > 2 {
			return d.ArgErr()
		}
		b, err := strconv.ParseFloat(args[0], 64)
		if err != nil || b <= 0 {
			return d.Errf("budget %q is not a positive amount", args[0])
		}
		l.Budget = b
		if len(args) == 2 {
			if args[1] != "day" && args[1] != "month" {
				return d.Errf("budget period %q: use day or month", args[1])
			}
			l.BudgetPeriod = args[1]
		}
		return nil
	}
	return d.Errf("unrecognized subdirective %q; limits are requests_per_minute, tokens_per_minute, tokens_per_day, budget, max_concurrent, models, tools, tool_calls_per_minute and tool_calls_per_day", dir)
}

// parsePrice parses a model's "price <input> <output>" (per million tokens).
func parsePrice(d *caddyfile.Dispenser, m *catalog.Model) error {
	var in, out string
	if !d.Args(&in, &out) || d.NextArg() {
		return d.ArgErr()
	}
	pi, err1 := strconv.ParseFloat(in, 64)
	po, err2 := strconv.ParseFloat(out, 64)
	if err1 != nil || err2 != nil || pi < 0 || po < 0 {
		return d.Errf("price %s %s: give the input and output price per million tokens, such as 0.15 0.60", in, out)
	}
	m.Price = &catalog.Price{InputPerMillion: pi, OutputPerMillion: po}
	return nil
}
