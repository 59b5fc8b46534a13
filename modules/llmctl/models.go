package llmctl

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// models is "llmgw ctl models": every model, its state and replicas.
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
					profilesText(m), tokensText(m.MaxOutput), strings.Join(m.Aliases, ","), m.Reason})
			}
			c.table("MODEL\tENGINE\tSTATE\tREPLICAS (MIN-MAX)\tPROFILES\tMAX OUTPUT\tALIASES\tREASON", rows)
			return nil
		}}
}

// profilesText is the profiles a model's replicas run on, one per
// replica (gpu,cpu), or - for a model without profiles.
func profilesText(m llmapi.ModelStatus) string {
	if len(m.Profiles) == 0 {
		return "-"
	}
	var on []string
	for _, r := range m.Replicas {
		if r.Profile != "" {
			on = append(on, r.Profile)
		}
	}
	if len(on) == 0 {
		return "none running"
	}
	return strings.Join(on, ",")
}

// tokensText is a count of tokens for a column: - when unset.
func tokensText(n int64) string {
	if n <= 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// model is "llmgw ctl model": the commands that change one model, each
// built by a step of its own below (plan.go, live.go, adapters.go and
// updates.go hold the rest).
func (c *ctl) model() *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Adds, scales, removes, stops or starts one model"}
	cmd.AddCommand(c.modelPlan(), c.modelPresets())
	cmd.AddCommand(c.modelAdd(), c.modelScale(), c.modelRemove(), c.modelSet(), c.modelRestart(), c.modelAdapter(), c.modelTest(), c.modelRetry(),
		c.modelLicence())
	cmd.AddCommand(c.modelUpdateCommands()...)
	cmd.AddCommand(c.modelStopStart()...)
	return cmd
}

// modelAdd is ctl model add: a model from a YAML or JSON file, its source
// checked first unless --no-check-source.
func (c *ctl) modelAdd() *cobra.Command {
	var file, preset, name string
	var noCheck bool
	add := &cobra.Command{Use: "add (-f <model.yaml|model.json> [--no-check-source] | --preset <preset> [--name <model>])", Short: "Adds a model, in the shape a model takes in the JSON config (its source is checked first), or a preset's model", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if preset != "" {
				if file != "" {
					return fmt.Errorf("give -f <model file> or --preset <preset>, not both")
				}
				return c.modelAddPreset(preset, name) // presets.go
			}
			if name != "" {
				return fmt.Errorf("--name names a preset's model: give it with --preset (a model file names its model)")
			}
			m, err := modelBody(file, noCheck)
			if err != nil {
				return err
			}
			var st llmapi.AddedModel
			if err := c.call("POST", "/llm/models", m, &st); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "model %s added: %s%s\n", st.Name, st.State, sourceLine(st.SourceCheck))
			return nil
		}}
	add.Flags().StringVarP(&file, "file", "f", "", "the model, in YAML or JSON")
	add.Flags().BoolVar(&noCheck, "no-check-source", false, "add it without checking its source (a source only the nodes can reach)")
	add.Flags().StringVar(&preset, "preset", "", "add a preset's model (llmgw ctl model presets lists them)")
	add.Flags().StringVar(&name, "name", "", "with --preset: the model's name (default: the preset's)")
	return add
}

// modelScale is ctl model scale: min, max, idle timeout and target
// concurrency; only the flags given are sent.
func (c *ctl) modelScale() *cobra.Command {
	var minR, maxR, target int
	var idle string
	scale := &cobra.Command{Use: "scale <model> --min N --max N [--idle-timeout D]", Short: "Rescales a model added at runtime; --max 0 keeps it without running it, a max above 0 starts it again (a stopped model too)", Args: cobra.ExactArgs(1),
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
			var st llmapi.Scaled
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/scale", body, &st); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "model %s: min %d, max %d\n", st.Name, st.Min, st.Max)
			if st.Note != "" {
				fmt.Fprintln(c.out, st.Note)
			}
			return nil
		}}
	scale.Flags().IntVar(&minR, "min", 1, "replicas kept running (0: on demand)")
	scale.Flags().IntVar(&maxR, "max", 0, "most replicas (0 keeps the model in the catalog without running it; default: min)")
	scale.Flags().StringVar(&idle, "idle-timeout", "", "stop replicas above min after this idle time")
	scale.Flags().IntVar(&target, "target-concurrency", 0, "requests per replica before another starts")
	return scale
}

// modelRemove is ctl model remove, with --purge its weights too.
func (c *ctl) modelRemove() *cobra.Command {
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
			fmt.Fprintf(c.out, "model %s removed\n", args[0])
			if purge {
				if len(out.Purged) == 0 {
					fmt.Fprintln(c.out, "no weights purged (none in the mirror, or another model uses them)")
				} else {
					fmt.Fprintf(c.out, "weights purged: %s\n", strings.Join(out.Purged, ", "))
				}
			}
			return nil
		}}
	remove.Flags().BoolVar(&purge, "purge", false, "also remove its weights from the mirror and the node cache (never what another model uses)")
	return remove
}

// settingsFlags are the flags of ctl model set that keep the replicas
// running; liveFlags are the ones that replace them.
type settingsFlags struct {
	class, owner, fallbacks, canary string
	maxOutput                       int64
	live                            liveFlags
}

// modelSet is ctl model set: POST …/settings with the flags given.
func (c *ctl) modelSet() *cobra.Command {
	var sf settingsFlags
	set := &cobra.Command{Use: "set <model> [--class C] [--owner O] [--fallbacks a,b] [--canary model:10%] [--max-output N] [--context-length N] [--option k=v] [--arg A] [--memory M] [--cores N] [--gpus N]", Short: "Changes a model's class, owner, fallbacks, canary or max output (replicas keep running), or its context length, options, args or resources (replicas replaced without downtime)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := sf.body(c, cmd, args[0])
			if err != nil {
				return err
			}
			var out llmapi.Rollout
			c.note = waitNote{what: "changing model " + args[0], status: func() string { return c.replicaStatus(args[0]) }}
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/settings", body, &out); err != nil || c.json {
				return err
			}
			if out.Replaced != nil {
				c.printRollout(out)
				return nil
			}
			st := out.ModelStatus
			can := "none"
			if st.Canary != nil {
				can = fmt.Sprintf("%s %g%%", st.Canary.Model, st.Canary.Share*100)
			}
			fmt.Fprintf(c.out, "model %s: class %s, owner %q, fallbacks [%s], canary %s, max output %s\n", st.Name, st.Class, st.Owner, strings.Join(st.Fallbacks, ","), can, tokensText(st.MaxOutput))
			return nil
		}}
	set.Flags().StringVar(&sf.class, "class", "", "critical, standard or opportunistic")
	set.Flags().StringVar(&sf.owner, "owner", "", "the organisation, team or project it belongs to")
	set.Flags().StringVar(&sf.fallbacks, "fallbacks", "", "models tried in order when it fails before its first byte (comma-separated; empty clears)")
	set.Flags().StringVar(&sf.canary, "canary", "", "model:percent sends that share of requests to model first (\"off\" removes it)")
	set.Flags().Int64Var(&sf.maxOutput, "max-output", 0, "the most tokens one answer may have (0 removes the limit)")
	sf.live.register(set)
	return set
}

// body is the body of POST …/settings: the flags given, and none is an
// error that lists them.
func (sf *settingsFlags) body(c *ctl, cmd *cobra.Command, model string) (map[string]any, error) {
	body := map[string]any{}
	fl := cmd.Flags()
	if fl.Changed("class") {
		body["class"] = sf.class
	}
	if fl.Changed("owner") {
		body["owner"] = sf.owner
	}
	if fl.Changed("fallbacks") {
		list := []string{}
		for _, f := range strings.Split(sf.fallbacks, ",") {
			if f = strings.TrimSpace(f); f != "" {
				list = append(list, f)
			}
		}
		body["fallbacks"] = list
	}
	if fl.Changed("canary") {
		can, err := parseCanary(sf.canary)
		if err != nil {
			return nil, err
		}
		body["canary"] = can
	}
	if fl.Changed("max-output") {
		if sf.maxOutput < 0 {
			return nil, fmt.Errorf("--max-output %d: use 0 (no limit) or more", sf.maxOutput)
		}
		body["max_output"] = sf.maxOutput
	}
	if err := sf.live.addTo(c, cmd, model, body); err != nil {
		return nil, err
	}
	if len(body) == 0 {
		return nil, fmt.Errorf("nothing to change; give --class, --owner, --fallbacks, --canary, --max-output, --context-length, --option, --arg, --memory, --cores or --gpus")
	}
	return body, nil
}

// modelStopStart are ctl model stop and start.
func (c *ctl) modelStopStart() []*cobra.Command {
	var cmds []*cobra.Command
	for _, action := range []string{"stop", "start"} {
		cmds = append(cmds, &cobra.Command{Use: action + " <model>", Short: strings.ToUpper(action[:1]) + action[1:] + " a model", Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				var m llmapi.ModelStatus
				if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/"+action, nil, &m); err != nil || c.json {
					return err
				}
				fmt.Fprintf(c.out, "model %s: %s\n", m.Name, m.State)
				return nil
			}})
	}
	return cmds
}

// modelRetry is ctl model retry: a model whose last start failed starts
// now instead of at the end of its backoff.
func (c *ctl) modelRetry() *cobra.Command {
	return &cobra.Command{Use: "retry <model>", Short: "Starts a model whose last start failed now, instead of at the end of its backoff", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var m llmapi.Retried
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/retry", nil, &m); err != nil || c.json {
				return err
			}
			on := ""
			if len(m.Nodes) > 0 {
				on = " on " + strings.Join(m.Nodes, ", ")
			}
			fmt.Fprintf(c.out, "model %s: start retried now%s; %s\n", m.Name, on, m.State)
			return nil
		}}
}

// modelBody is a model file as the admin API's body for an add or a
// plan; noCheck turns the source check off.
func modelBody(path string, noCheck bool) (map[string]any, error) {
	m, err := readModelFile(path)
	if err == nil && noCheck {
		m["check_source"] = false
	}
	return m, err
}

// readModelFile reads a model in YAML (or JSON, which is YAML too).
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
