package llmctl

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// tenants is llmgw ctl tenants: the tenancy tree (organisations, teams,
// projects), their limits and capacities, changed at runtime.
func (c *ctl) tenants() *cobra.Command {
	cmd := &cobra.Command{Use: "tenants", Short: "Lists the tenancy tree: every organisation, team and project with its limits, capacity, use, models and keys",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var ls []llmapi.TenantLevel
			if err := c.call("GET", "/llm/tenants", nil, &ls); err != nil || c.json {
				return err
			}
			c.printTenants(ls)
			return nil
		}}
	cmd.AddCommand(c.tenantGet(), c.tenantCreate(), c.tenantSet(), c.tenantDelete())
	return cmd
}

// tenantGet is ctl tenants get: one level.
func (c *ctl) tenantGet() *cobra.Command {
	get := &cobra.Command{Use: "get <org[/team[/project]]>", Short: "Shows one level", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var l llmapi.TenantLevel
			if err := c.call("GET", tenantURL(args[0]), nil, &l); err != nil || c.json {
				return err
			}
			c.printTenants([]llmapi.TenantLevel{l})
			return nil
		}}
	return get
}

// tenantCreate is ctl tenants create: a level under its parent, the
// parent's path the argument's before its last slash.
func (c *ctl) tenantCreate() *cobra.Command {
	create := &cobra.Command{Use: "create <org[/team[/project]]>", Short: "Creates a level under its parent, with the limits and capacity the flags give",
		Args: cobra.ExactArgs(1)}
	createFlags := tenantFlags(create.Flags())
	create.RunE = func(cmd *cobra.Command, args []string) error {
		body, err := createFlags.body(cmd.Flags())
		if err != nil {
			return err
		}
		parent, name := "", args[0]
		if i := strings.LastIndex(args[0], "/"); i >= 0 {
			parent, name = args[0][:i], args[0][i+1:]
		}
		body["name"] = name
		var l llmapi.TenantLevel
		if err := c.call("POST", tenantCollection(parent), body, &l); err != nil || c.json {
			return err
		}
		fmt.Fprintf(c.out, "%s %s created\n", l.Kind, l.Path)
		return nil
	}
	return create
}

// tenantSet is ctl tenants set: a JSON merge patch of the flags given.
func (c *ctl) tenantSet() *cobra.Command {
	set := &cobra.Command{Use: "set <org[/team[/project]]>", Short: "Changes the limits and capacity the flags name (0 removes one); the others stay",
		Args: cobra.ExactArgs(1)}
	setFlags := tenantFlags(set.Flags())
	set.RunE = func(cmd *cobra.Command, args []string) error {
		body, err := setFlags.body(cmd.Flags())
		if err != nil {
			return err
		}
		var l llmapi.TenantLevel
		if err := c.call("PATCH", tenantURL(args[0]), body, &l); err != nil || c.json {
			return err
		}
		fmt.Fprintf(c.out, "%s %s changed\n", l.Kind, l.Path)
		c.printTenants([]llmapi.TenantLevel{l})
		return nil
	}
	return set
}

// tenantDelete is ctl tenants delete.
func (c *ctl) tenantDelete() *cobra.Command {
	del := &cobra.Command{Use: "delete <org[/team[/project]]>", Short: "Deletes a level created at runtime that has no levels, keys or models left",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("DELETE", tenantURL(args[0]), nil, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "%s deleted\n", args[0])
			return nil
		}}
	return del
}

// tenantURL is the admin route of a level by its path.
func tenantURL(path string) string {
	parts := strings.Split(path, "/")
	coll := []string{"orgs", "teams", "projects"}
	var b strings.Builder
	b.WriteString("/llm/tenants")
	for i, p := range parts {
		if i < len(coll) {
			b.WriteString("/" + coll[i])
		}
		b.WriteString("/" + url.PathEscape(p))
	}
	return b.String()
}

// tenantCollection is the route that creates levels under parent.
func tenantCollection(parent string) string {
	if parent == "" {
		return "/llm/tenants/orgs"
	}
	return tenantURL(parent) + [...]string{"", "/teams", "/projects", "/projects"}[min(strings.Count(parent, "/")+1, 3)]
}

type tenantFlagSet struct {
	ints   map[string]*int64 // flag → value; the JSON field is the flag with - as _
	models []string
	memory string
}

var tenantIntFlags = []struct{ flag, field, usage string }{
	{"requests-per-minute", "limits.requests_per_minute", "requests per clock minute"},
	{"tokens-per-minute", "limits.tokens_per_minute", "tokens per clock minute"},
	{"tokens-per-day", "limits.tokens_per_day", "tokens per UTC day"},
	{"max-concurrent", "limits.max_concurrent", "requests in flight"},
	{"max-output", "limits.max_output", "tokens one answer may have"},
	{"jobs-per-day", "limits.jobs_per_day", "jobs accepted per UTC day"},
	{"concurrent-jobs", "limits.concurrent_jobs", "jobs running at once; more wait queued"},
	{"gpu-seconds-per-day", "limits.gpu_seconds_per_day", "seconds jobs ran times their replicas' GPUs, per UTC day"},
	{"cores", "capacity.cores", "capacity: cores the models it owns may hold"},
	{"gpus", "capacity.gpus", "capacity: GPUs the models it owns may hold"},
	{"replicas", "capacity.replicas", "capacity: replicas the models it owns may run"},
}

func tenantFlags(fs *pflag.FlagSet) *tenantFlagSet {
	t := &tenantFlagSet{ints: map[string]*int64{}}
	for _, f := range tenantIntFlags {
		t.ints[f.flag] = fs.Int64(f.flag, 0, f.usage)
	}
	fs.StringSliceVar(&t.models, "models", nil, "the models it may use: names, aliases or globs (comma-separated)")
	fs.StringVar(&t.memory, "memory", "", "capacity: memory the models it owns may hold, such as 64GiB")
	return t
}

// body makes a JSON merge patch of the flags given: a zero removes.
func (t *tenantFlagSet) body(fs *pflag.FlagSet) (map[string]any, error) {
	out := map[string]any{}
	put := func(field string, v any) {
		sec, key, _ := strings.Cut(field, ".")
		m, _ := out[sec].(map[string]any)
		if m == nil {
			m = map[string]any{}
			out[sec] = m
		}
		m[key] = v
	}
	for _, f := range tenantIntFlags {
		if fs.Changed(f.flag) {
			v := *t.ints[f.flag]
			if v < 0 {
				return nil, fmt.Errorf("--%s %d: use 0 (no limit) or more", f.flag, v)
			}
			put(f.field, nilIfZero(v))
		}
	}
	if fs.Changed("models") {
		put("limits.models", t.models)
	}
	if fs.Changed("memory") {
		var n uint64
		if t.memory != "0" {
			var err error
			if n, err = humanize.ParseBytes(t.memory); err != nil {
				return nil, fmt.Errorf("--memory %q is not a size such as 64GiB", t.memory)
			}
		}
		put("capacity.memory", nilIfZero(int64(n)))
	}
	return out, nil
}

func nilIfZero(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func (c *ctl) printTenants(ls []llmapi.TenantLevel) {
	var rows [][]string
	for _, l := range ls {
		rows = append(rows, []string{l.Kind, l.Path, l.Source, limitsText(l.Limits), capacityText(l.Capacity),
			useText(l.Used), strings.Join(l.Models, ","), strconv.Itoa(l.Keys)})
	}
	c.table("LEVEL\tPATH\tSOURCE\tLIMITS\tCAPACITY\tUSED\tMODELS\tKEYS", rows)
}

func limitsText(l *tenancy.Limits) string {
	if l == nil {
		return "-"
	}
	var parts []string
	add := func(v int64, what string) {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", v, what))
		}
	}
	add(l.RequestsPerMinute, "req/min")
	add(l.TokensPerMinute, "tok/min")
	add(l.TokensPerDay, "tok/day")
	add(l.MaxConcurrent, "concurrent")
	add(l.JobsPerDay, "jobs/day")
	add(l.ConcurrentJobs, "concurrent jobs")
	add(l.GPUSecondsPerDay, "GPU s/day")
	if l.MaxOutput > 0 {
		parts = append(parts, fmt.Sprintf("max output %d", l.MaxOutput))
	}
	if l.Budget > 0 {
		parts = append(parts, fmt.Sprintf("budget %g/%s", l.Budget, l.BudgetPeriod))
	}
	if len(l.Models) > 0 {
		parts = append(parts, "models "+strings.Join(l.Models, ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func capacityText(c *tenancy.Capacity) string {
	if c == nil {
		return "-"
	}
	var parts []string
	if c.Memory > 0 {
		parts = append(parts, humanize.IBytes(uint64(c.Memory))+" memory")
	}
	if c.Cores > 0 {
		parts = append(parts, fmt.Sprintf("%d cores", c.Cores))
	}
	if c.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", c.GPUs))
	}
	if c.Replicas > 0 {
		parts = append(parts, fmt.Sprintf("%d replicas", c.Replicas))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func useText(u llmapi.OwnerUse) string {
	if u.Replicas == 0 {
		return "-"
	}
	return fmt.Sprintf("%d replicas, %s memory, %d cores, %d GPUs", u.Replicas, humanize.IBytes(uint64(u.Memory)), u.Cores, u.GPUs)
}
