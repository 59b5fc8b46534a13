package tenancy

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// ParseOrg reads an organisation of the tenancy tree, and hands it to
// add once it is read whole:
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
//	max_output          <tokens>    # the most tokens one answer may have
//	models              <name|glob...>
//	tools               <server.tool|glob...>
//	tool_calls_per_minute <n>
//	tool_calls_per_day    <n>
//	kb_bytes            <size>      # knowledge bases' files (llm_kb)
//	kb_files            <n>
//	jobs_per_day        <n>         # jobs accepted per UTC day (llm_jobs)
//	concurrent_jobs     <n>         # jobs running at once; more wait queued
//	gpu_seconds_per_day <n>         # seconds jobs ran × their replicas' GPUs
func ParseOrg(d *caddyfile.Dispenser, add func(*Org)) error {
	o := new(Org)
	if err := caddyfileutil.NameArg(d, &o.Name); err != nil {
		return err
	}
	return ParseNode(d, &o.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, ParseCapacity(d, &o.Capacity)
		}
		if dir != "team" {
			return false, nil
		}
		t := new(Team)
		o.Teams = append(o.Teams, t)
		return true, ParseTeam(d, t)
	}, func() { add(o) })
}

// ParseTeam reads a team block of an organisation into t.
func ParseTeam(d *caddyfile.Dispenser, t *Team) error {
	if err := caddyfileutil.NameArg(d, &t.Name); err != nil {
		return err
	}
	return ParseNode(d, &t.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, ParseCapacity(d, &t.Capacity)
		}
		if dir != "project" {
			return false, nil
		}
		p := new(Project)
		t.Projects = append(t.Projects, p)
		return true, parseProject(d, p)
	}, func() {})
}

func parseProject(d *caddyfile.Dispenser, p *Project) error {
	if err := caddyfileutil.NameArg(d, &p.Name); err != nil {
		return err
	}
	return ParseNode(d, &p.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, ParseCapacity(d, &p.Capacity)
		}
		if dir != "key" {
			return false, nil
		}
		k := new(APIKey)
		if !d.Args(&k.ID, &k.SHA256) || d.NextArg() {
			return true, d.ArgErr()
		}
		p.Keys = append(p.Keys, k)
		return true, ParseNode(d, &k.Limits, func(string) (bool, error) { return false, nil }, func() {})
	}, func() {})
}

// ParseCapacity parses a level's capacity block (memory, cores, gpus,
// replicas); a second block on one level is refused.
func ParseCapacity(d *caddyfile.Dispenser, dst **Capacity) error {
	if *dst != nil {
		return d.Err("duplicate subdirective \"capacity\"")
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	c := new(Capacity)
	*dst = c
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "memory":
			if err := caddyfileutil.SizeArg(d, &c.Memory, "memory", "64GiB"); err != nil {
				return err
			}
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

// ParseNode parses a block of limits and children; child handles the
// subdirectives limits do not know.
func ParseNode(d *caddyfile.Dispenser, lp **Limits, child func(dir string) (bool, error), done func()) error {
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
			*lp = new(Limits)
		}
		if err := parseLimit(d, *lp, dir); err != nil {
			return err
		}
	}
	done()
	return nil
}

func parseLimit(d *caddyfile.Dispenser, l *Limits, dir string) error {
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
	case "max_output":
		return i64(&l.MaxOutput)
	case "models":
		return caddyfileutil.ManyArgs(d, &l.Models)
	case "tools":
		return caddyfileutil.ManyArgs(d, &l.Tools)
	case "tool_calls_per_minute":
		return i64(&l.ToolCallsPerMinute)
	case "tool_calls_per_day":
		return i64(&l.ToolCallsPerDay)
	case "kb_bytes":
		return caddyfileutil.SizeArg(d, &l.KBBytes, dir, "10GiB")
	case "kb_files":
		return i64(&l.KBFiles)
	case "jobs_per_day":
		return i64(&l.JobsPerDay)
	case "concurrent_jobs":
		return i64(&l.ConcurrentJobs)
	case "gpu_seconds_per_day":
		return i64(&l.GPUSecondsPerDay)
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
	return d.Errf("unrecognized subdirective %q; limits are requests_per_minute, tokens_per_minute, tokens_per_day, budget, max_concurrent, max_output, models, tools, tool_calls_per_minute, tool_calls_per_day, kb_bytes, kb_files, jobs_per_day, concurrent_jobs and gpu_seconds_per_day", dir)
}
