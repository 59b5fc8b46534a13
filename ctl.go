package llmgw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "ctl",
		Short: "Operates a running llmgw through its admin endpoint",
		Long: `
Reads and changes a running llmgw through the llm routes of its admin
endpoint: --admin, else $LLMGW_ADMIN, else the admin address of the config
file --config names (as llmgw reload reads it), else localhost:2019.
Tables by default, --json for scripts. Changes are logged with the OS user
as the actor.

With --url (or LLMGW_ADMIN_URL) it talks to a site's llm_admin handler
instead, such as https://gw.example.com/llm, sending --token (or
LLMGW_ADMIN_TOKEN) as a bearer token; changes are then logged with the
token's id as the actor.`,
		CobraFunc: func(cmd *cobra.Command) {
			var c ctl
			cmd.PersistentFlags().StringVar(&c.admin, "admin", os.Getenv("LLMGW_ADMIN"), "the admin endpoint's address (default $LLMGW_ADMIN, else the --config file's, else localhost:2019)")
			cmd.PersistentFlags().StringVar(&c.config, "config", "", "a config file whose admin address to use, as llmgw reload --config does")
			cmd.PersistentFlags().BoolVar(&c.json, "json", false, "print JSON")
			cmd.PersistentFlags().StringVar(&c.url, "url", os.Getenv("LLMGW_ADMIN_URL"), "a site's llm_admin address, such as https://gw.example.com/llm (default $LLMGW_ADMIN_URL)")
			cmd.PersistentFlags().StringVar(&c.token, "token", "", "the llm_admin token to send (default $LLMGW_ADMIN_TOKEN)")
			cmd.AddCommand(c.models(), c.model(), c.replicas(), c.engines(), c.keys(), c.usage(), c.cache(), c.nodes(), c.mcp(), c.audit(), c.weights(),
				c.tenants()) // ctl_tenants.go
		},
	})
}

type ctl struct {
	admin  string
	config string // a config file whose admin address is used when admin is empty
	json   bool
	url    string // a site's llm_admin, where the /llm routes are
	token  string
	// timeout bounds one call; 0 is 30s. Commands that wait for replicas
	// to be replaced set a longer one.
	timeout time.Duration
}

// endpoint returns the URL of an admin path (/llm/…), and the endpoint's
// name and a hint for errors: the site's llm_admin with --url, else
// --admin.
func (c *ctl) endpoint(path string) (target, where, hint string) {
	if c.url == "" {
		if c.admin == "" {
			c.admin = caddy.DefaultAdminListen
			if c.config != "" {
				if addr, err := caddycmd.DetermineAdminAPIAddress("", nil, c.config, ""); err == nil {
					c.admin = addr
				}
			}
		}
		base := c.admin
		if !strings.Contains(base, "://") {
			base = "http://" + base
		}
		return base + path, "llmgw's admin endpoint at " + c.admin, "is llmgw running, and is --admin right?"
	}
	base := strings.TrimSuffix(c.url, "/")
	if u, err := url.Parse(base); err == nil && u.Path == "" {
		base += "/llm"
	}
	return base + strings.TrimPrefix(path, "/llm"), "llm_admin at " + c.url, "is --url right (the address of the site's /llm routes)?"
}

func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// call sends a request to the admin endpoint and decodes the answer into
// out (when not nil); admin errors come back with their message.
func (c *ctl) call(method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	target, where, hint := c.endpoint(path)
	req, err := http.NewRequest(method, target, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if u, err := user.Current(); err == nil {
		req.Header.Set("X-Llmgw-Actor", u.Username)
	}
	token := c.token
	if token == "" {
		token = os.Getenv("LLMGW_ADMIN_TOKEN")
	}
	if token != "" {
		if u := req.URL; u.Scheme == "http" && !loopback(u.Hostname()) {
			return fmt.Errorf("--url %s is plain http: the token would cross the network readable; use https://", c.url)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	timeout := c.timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	resp, err := (&http.Client{Timeout: timeout}).Do(req)
	if err != nil {
		return fmt.Errorf("reaching %s: %w; %s", where, err, hint)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		var e struct{ Error string }
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s%s", e.Error, hostHint(e.Error, c.admin))
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if c.json {
		_, err := os.Stdout.Write(raw)
		return err
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// hostHint says what to change when Caddy's admin endpoint refused the
// Host it was reached by: on a loopback address it accepts only
// localhost, 127.0.0.1 and ::1 unless its origins list the address.
func hostHint(msg, admin string) string {
	if !strings.HasPrefix(msg, "host not allowed") {
		return ""
	}
	return fmt.Sprintf("; Caddy's admin endpoint accepts only the hosts its origins list (by default, on a loopback address: localhost, 127.0.0.1 and ::1): "+
		"list this one in the config's admin option (admin %s { origins %s }), or listen on 127.0.0.1", admin, admin)
}

func table(header string, rows [][]string) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

func (c *ctl) models() *cobra.Command {
	return &cobra.Command{Use: "models", Short: "Lists the models, their state and replicas", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var ms []llmapi.ModelStatus
			if err := c.call("GET", "/llm/models", nil, &ms); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, m := range ms {
				rows = append(rows, []string{m.Name, m.Engine, m.State, fmt.Sprintf("%d/%d-%d", len(m.Replicas), m.Min, m.Max),
					strings.Join(m.Aliases, ","), m.Reason})
			}
			table("MODEL\tENGINE\tSTATE\tREPLICAS (MIN-MAX)\tALIASES\tREASON", rows)
			return nil
		}}
}

func (c *ctl) model() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Adds, scales, removes, stops or starts one model"}
	var file string
	var noCheck bool
	add := &cobra.Command{Use: "add -f <model.yaml|model.json> [--no-check-source]", Short: "Adds a model, in the shape a model takes in the JSON config; its source is checked first", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			m, err := modelBody(file, noCheck)
			if err != nil {
				return err
			}
			var st llmapi.AddedModel
			if err := c.call("POST", "/llm/models", m, &st); err != nil || c.json {
				return err
			}
			fmt.Printf("model %s added: %s%s\n", st.Name, st.State, sourceLine(st.SourceCheck))
			return nil
		}}
	add.Flags().StringVarP(&file, "file", "f", "", "the model, in YAML or JSON")
	add.Flags().BoolVar(&noCheck, "no-check-source", false, "add it without checking its source (a source only the nodes can reach)")
	cmd.AddCommand(c.modelPlan())
	var minR, maxR, target int
	var idle string
	scale := &cobra.Command{Use: "scale <model> --min N --max N [--idle-timeout D]", Short: "Rescales a model added at runtime; --max 0 keeps it without running it, a max above 0 starts it again", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if cmd.Flags().Changed("min") {
				body["min"] = minR
			}
			if cmd.Flags().Changed("max") {
				body["max"] = maxR
			}
			if idle != "" {
				body["idle_timeout"] = idle
			}
			if target > 0 {
				body["target_concurrency"] = target
			}
			var st llmapi.ModelStatus
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/scale", body, &st); err != nil || c.json {
				return err
			}
			fmt.Printf("model %s: min %d, max %d\n", st.Name, st.Min, st.Max)
			return nil
		}}
	scale.Flags().IntVar(&minR, "min", 1, "replicas kept running (0: on demand)")
	scale.Flags().IntVar(&maxR, "max", 0, "most replicas (0 keeps the model in the catalog without running it; default: min)")
	scale.Flags().StringVar(&idle, "idle-timeout", "", "stop replicas above min after this idle time")
	scale.Flags().IntVar(&target, "target-concurrency", 0, "requests per replica before another starts")
	var purge bool
	remove := &cobra.Command{Use: "remove <model> [--purge]", Short: "Removes a model added at runtime", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path := "/llm/models/" + url.PathEscape(args[0])
			if purge {
				path += "?purge=true"
			}
			var out struct {
				Purged []string `json:"purged"`
			}
			if err := c.call("DELETE", path, nil, &out); err != nil || c.json {
				return err
			}
			fmt.Printf("model %s removed\n", args[0])
			if purge {
				if len(out.Purged) == 0 {
					fmt.Println("no weights purged (none in the mirror, or another model uses them)")
				} else {
					fmt.Printf("weights purged: %s\n", strings.Join(out.Purged, ", "))
				}
			}
			return nil
		}}
	remove.Flags().BoolVar(&purge, "purge", false, "also remove its weights from the mirror and the node cache (never what another model uses)")
	var class, owner, fallbacks, canary string
	var lf liveFlags
	set := &cobra.Command{Use: "set <model> [--class C] [--owner O] [--fallbacks a,b] [--canary model:10%] [--context-length N] [--option k=v] [--arg A] [--memory M] [--cores N] [--gpus N]", Short: "Changes a model's class, owner, fallbacks or canary (replicas keep running), or its context length, options, args or resources (replicas replaced without downtime)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body := map[string]any{}
			if cmd.Flags().Changed("class") {
				body["class"] = class
			}
			if cmd.Flags().Changed("owner") {
				body["owner"] = owner
			}
			if cmd.Flags().Changed("fallbacks") {
				list := []string{}
				for _, f := range strings.Split(fallbacks, ",") {
					if f = strings.TrimSpace(f); f != "" {
						list = append(list, f)
					}
				}
				body["fallbacks"] = list
			}
			if cmd.Flags().Changed("canary") {
				c, err := parseCanary(canary)
				if err != nil {
					return err
				}
				body["canary"] = c
			}
			if err := lf.addTo(c, cmd, args[0], body); err != nil {
				return err
			}
			if len(body) == 0 {
				return fmt.Errorf("nothing to change; give --class, --owner, --fallbacks, --canary, --context-length, --option, --arg, --memory, --cores or --gpus")
			}
			var out llmapi.Rollout
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/settings", body, &out); err != nil || c.json {
				return err
			}
			if out.Replaced != nil {
				printRollout(out)
				return nil
			}
			st := out.ModelStatus
			can := "none"
			if st.Canary != nil {
				can = fmt.Sprintf("%s %g%%", st.Canary.Model, st.Canary.Share*100)
			}
			fmt.Printf("model %s: class %s, owner %q, fallbacks [%s], canary %s\n", st.Name, st.Class, st.Owner, strings.Join(st.Fallbacks, ","), can)
			return nil
		}}
	set.Flags().StringVar(&class, "class", "", "critical, standard or opportunistic")
	set.Flags().StringVar(&owner, "owner", "", "the organisation, team or project it belongs to")
	set.Flags().StringVar(&fallbacks, "fallbacks", "", "models tried in order when it fails before its first byte (comma-separated; empty clears)")
	set.Flags().StringVar(&canary, "canary", "", "model:percent sends that share of requests to model first (\"off\" removes it)")
	lf.register(set)
	cmd.AddCommand(add, scale, remove, set, c.modelRestart(), c.modelAdapter())
	cmd.AddCommand(c.modelUpdateCommands()...) // ctl_updates.go
	for _, action := range []string{"stop", "start"} {
		cmd.AddCommand(&cobra.Command{Use: action + " <model>", Short: strings.ToUpper(action[:1]) + action[1:] + " a model", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				var m llmapi.ModelStatus
				if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/"+action, nil, &m); err != nil || c.json {
					return err
				}
				fmt.Printf("model %s: %s\n", m.Name, m.State)
				return nil
			}})
	}
	return cmd
}

func (c *ctl) replicas() *cobra.Command {
	restart := &cobra.Command{Use: "restart <replica>", Short: "Replaces one replica with a new one", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("POST", "/llm/replicas/"+url.PathEscape(args[0])+"/restart", nil, nil); err != nil || c.json {
				return err
			}
			fmt.Printf("replica %s restarting\n", args[0])
			return nil
		}}
	cmd := c.replicaList()
	cmd.AddCommand(restart)
	return cmd
}

func (c *ctl) replicaList() *cobra.Command {
	return &cobra.Command{Use: "replicas", Short: "Lists the replicas of every model", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var ms []llmapi.ModelStatus
			if err := c.call("GET", "/llm/models", nil, &ms); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, m := range ms {
				for _, r := range m.Replicas {
					rows = append(rows, []string{r.ID, m.Name, r.State, r.Node, r.URL, fmt.Sprint(r.PID), devicesCol(r.GPUs), fmt.Sprint(r.Inflight),
						time.Since(r.Started).Round(time.Second).String()})
				}
			}
			table("REPLICA\tMODEL\tSTATE\tNODE\tURL\tPID\tGPUS\tIN FLIGHT\tUP", rows)
			return nil
		}}
}

func (c *ctl) engines() *cobra.Command {
	return &cobra.Command{Use: "engines", Short: "Lists the engine plugins", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var es []llmapi.EngineStatus
			if err := c.call("GET", "/llm/engines", nil, &es); err != nil || c.json {
				return err
			}
			sort.Slice(es, func(i, j int) bool { return es[i].Type < es[j].Type })
			var rows [][]string
			for _, e := range es {
				rows = append(rows, []string{e.Type, e.Version, fmt.Sprint(e.PID), strings.Join(e.Capabilities, ","), strings.Join(e.Formats, ",")})
			}
			table("ENGINE\tVERSION\tPID\tCAPABILITIES\tFORMATS", rows)
			return nil
		}}
}

func (c *ctl) keys() *cobra.Command {
	cmd := &cobra.Command{Use: "keys", Short: "Lists API keys (never their secrets)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var ks []llmapi.KeyInfo
			if err := c.call("GET", "/llm/keys", nil, &ks); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, k := range ks {
				state := "active"
				if k.Revoked != nil {
					state = "revoked " + k.Revoked.Format(time.RFC3339)
				}
				rows = append(rows, []string{k.ID, k.Project, k.Source, state})
			}
			table("KEY\tPROJECT\tSOURCE\tSTATE", rows)
			return nil
		}}
	var project, id string
	create := &cobra.Command{Use: "create", Short: "Creates a key and prints its secret once", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if project == "" {
				return fmt.Errorf("--project is required: org/team/project as declared in the config")
			}
			var k llmapi.KeyInfo
			if err := c.call("POST", "/llm/keys", map[string]string{"project": project, "id": id}, &k); err != nil || c.json {
				return err
			}
			fmt.Printf("key %s in %s\nsecret: %s\n(the secret is shown only now)\n", k.ID, k.Project, k.Secret)
			return nil
		}}
	create.Flags().StringVar(&project, "project", "", "org/team/project")
	create.Flags().StringVar(&id, "id", "", "the key's id (default: generated)")
	revoke := &cobra.Command{Use: "revoke <id>", Short: "Revokes a key created at runtime", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("DELETE", "/llm/keys/"+url.PathEscape(args[0]), nil, nil); err != nil || c.json {
				return err
			}
			fmt.Printf("key %s revoked\n", args[0])
			return nil
		}}
	rotate := &cobra.Command{Use: "rotate <id>", Short: "Issues a new secret for a key; the old one stops working", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var k llmapi.KeyInfo
			if err := c.call("POST", "/llm/keys/"+url.PathEscape(args[0])+"/rotate", nil, &k); err != nil || c.json {
				return err
			}
			fmt.Printf("key %s rotated\nsecret: %s\n(the secret is shown only now)\n", k.ID, k.Secret)
			return nil
		}}
	var lim tenancy.Limits
	var clear bool
	limits := &cobra.Command{Use: "limits <id>", Short: "Replaces the limits of a key created at runtime (--clear removes them)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !clear && cmd.Flags().NFlag() == 0 {
				return fmt.Errorf("give the limits (such as --requests-per-minute 60) or --clear to remove them")
			}
			if clear {
				lim = tenancy.Limits{}
			}
			var k llmapi.KeyInfo
			if err := c.call("PUT", "/llm/keys/"+url.PathEscape(args[0])+"/limits", lim, &k); err != nil || c.json {
				return err
			}
			b, _ := json.Marshal(k.Limits)
			if k.Limits == nil {
				b = []byte("none of its own")
			}
			fmt.Printf("key %s limits: %s\n", k.ID, b)
			return nil
		}}
	f := limits.Flags()
	f.Int64Var(&lim.RequestsPerMinute, "requests-per-minute", 0, "requests in each clock minute")
	f.Int64Var(&lim.TokensPerMinute, "tokens-per-minute", 0, "prompt plus completion tokens in each clock minute")
	f.Int64Var(&lim.TokensPerDay, "tokens-per-day", 0, "tokens in each UTC day")
	f.Int64Var(&lim.MaxConcurrent, "max-concurrent", 0, "requests in flight")
	f.Float64Var(&lim.Budget, "budget", 0, "spending per budget period, in the catalog's currency")
	f.StringVar(&lim.BudgetPeriod, "budget-period", "", "day or month (default month)")
	f.StringSliceVar(&lim.Models, "models", nil, "models the key may use (names or globs, comma-separated)")
	f.BoolVar(&clear, "clear", false, "remove the key's own limits")
	cmd.AddCommand(create, revoke, rotate, limits)
	return cmd
}

func (c *ctl) usage() *cobra.Command {
	var org, team, project, key, since string
	cmd := &cobra.Command{Use: "usage", Short: "Shows usage by model for a node of the tenancy tree", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"org": org, "team": team, "project": project, "key": key} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if len(q) != 1 {
				return fmt.Errorf("name one node: --org, --team org/team, --project org/team/project or --key id")
			}
			d, err := time.ParseDuration(since)
			if err != nil {
				return fmt.Errorf("--since %q: use a duration such as 24h", since)
			}
			q.Set("from", time.Now().Add(-d).UTC().Format(time.RFC3339))
			var u struct {
				Models map[string]llmapi.Usage `json:"models"`
				Total  llmapi.Usage            `json:"total"`
			}
			if err := c.call("GET", "/llm/usage?"+q.Encode(), nil, &u); err != nil || c.json {
				return err
			}
			var rows [][]string
			for m, x := range u.Models {
				rows = append(rows, usageRow(m, x))
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
			table("MODEL\tREQUESTS\tINPUT TOKENS\tOUTPUT TOKENS\tCOST", append(rows, usageRow("(total)", u.Total)))
			return nil
		}}
	cmd.Flags().StringVar(&org, "org", "", "an organisation")
	cmd.Flags().StringVar(&team, "team", "", "a team: org/team")
	cmd.Flags().StringVar(&project, "project", "", "a project: org/team/project")
	cmd.Flags().StringVar(&key, "key", "", "a key id")
	cmd.Flags().StringVar(&since, "since", "24h", "how far back")
	return cmd
}

func usageRow(name string, u llmapi.Usage) []string {
	return []string{name, fmt.Sprint(u.Requests), fmt.Sprint(u.InputTokens), fmt.Sprint(u.OutputTokens),
		fmt.Sprintf("%.4f", float64(u.CostMicros)/1e6)}
}

func (c *ctl) cache() *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Shows cache entries and outcomes", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var stats []map[string]int64
			if err := c.call("GET", "/llm/cache", nil, &stats); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, s := range stats {
				rows = append(rows, []string{fmt.Sprint(s["entries"]), fmt.Sprint(s["bytes"]), fmt.Sprint(s["hits_exact"]),
					fmt.Sprint(s["hits_semantic"]), fmt.Sprint(s["misses"]), fmt.Sprint(s["bypass"])})
			}
			table("ENTRIES\tBYTES\tEXACT HITS\tSEMANTIC HITS\tMISSES\tBYPASSED", rows)
			return nil
		}}
	var model, scope string
	purge := &cobra.Command{Use: "purge", Short: "Removes cache entries of a model and/or scope (all without flags)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var out map[string]int
			if err := c.call("POST", "/llm/cache/purge", map[string]string{"model": model, "scope": scope}, &out); err != nil || c.json {
				return err
			}
			fmt.Printf("purged %d entries\n", out["purged"])
			return nil
		}}
	purge.Flags().StringVar(&model, "model", "", "a catalog model")
	purge.Flags().StringVar(&scope, "scope", "", "a scope, such as p:org/team/project")
	cmd.AddCommand(purge)
	return cmd
}

// readModelFile reads a model in YAML (or JSON, which is YAML too).
// modelBody is a model file as the admin API's body for an add or a
// plan; noCheck turns the source check off.
func modelBody(path string, noCheck bool) (map[string]any, error) {
	m, err := readModelFile(path)
	if err == nil && noCheck {
		m["check_source"] = false
	}
	return m, err
}

func readModelFile(path string) (map[string]any, error) {
	if path == "" {
		return nil, fmt.Errorf("give the model's file with -f model.yaml")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := yaml.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s is not YAML or JSON: %w", path, err)
	}
	return m, nil
}

// parseCanary reads model:percent (such as chat-v2:10%) or "off".
func parseCanary(s string) (catalog.Canary, error) {
	if s == "off" || s == "" {
		return catalog.Canary{}, nil
	}
	model, pct, ok := strings.Cut(s, ":")
	share, err := strconv.ParseFloat(strings.TrimSuffix(pct, "%"), 64)
	if !ok || model == "" || err != nil || share < 0 || share > 100 {
		return catalog.Canary{}, fmt.Errorf("--canary %q: want model:percent such as chat-v2:10%%, or off", s)
	}
	return catalog.Canary{Model: model, Share: share / 100}, nil
}
