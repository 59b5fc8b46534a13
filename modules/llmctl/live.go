package llmctl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// liveFlags are the flags of ctl model set that change what a model's
// replicas run with; the gateway replaces them without downtime.
type liveFlags struct {
	contextLength int64
	options, args []string
	memory        string
	cores, gpus   int
}

func (lf *liveFlags) register(cmd *cobra.Command) {
	cmd.Flags().Int64Var(&lf.contextLength, "context-length", 0, "the context window in tokens (replaces the replicas without downtime)")
	cmd.Flags().StringArrayVar(&lf.options, "option", nil, "an engine option k=v, repeatable; k= removes it (replaces the replicas)")
	cmd.Flags().StringArrayVar(&lf.args, "arg", nil, "an engine argument, repeatable; the list replaces the model's args (--arg '' clears them; replaces the replicas)")
	cmd.Flags().StringVar(&lf.memory, "memory", "", "memory per replica, such as 8GiB (replaces the replicas)")
	cmd.Flags().IntVar(&lf.cores, "cores", 0, "cores per replica (replaces the replicas)")
	cmd.Flags().IntVar(&lf.gpus, "gpus", 0, "GPUs per replica (replaces the replicas)")
}

// addTo puts the given flags into the body of POST …/settings; resources
// not given keep the model's current values.
func (lf *liveFlags) addTo(c *ctl, cmd *cobra.Command, model string, body map[string]any) error {
	fl := cmd.Flags()
	if fl.Changed("context-length") {
		body["context_length"] = lf.contextLength
	}
	if fl.Changed("option") {
		opts := map[string]string{}
		for _, kv := range lf.options {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("--option %q: use k=v (k= removes the option)", kv)
			}
			opts[k] = v
		}
		body["options"] = opts
	}
	if fl.Changed("arg") {
		args := []string{}
		for _, a := range lf.args {
			if a != "" {
				args = append(args, a)
			}
		}
		body["args"] = args
	}
	if fl.Changed("memory") || fl.Changed("cores") || fl.Changed("gpus") {
		res, err := lf.resources(c, fl, model)
		if err != nil {
			return err
		}
		body["resources"] = res
	}
	return nil
}

// resources are the model's current resources with those the flags give
// in their place; read whatever --json says, or --json would print them
// and send the others as zero.
func (lf *liveFlags) resources(c *ctl, fl *pflag.FlagSet, model string) (catalog.Resources, error) {
	var st llmapi.ModelStatus
	if err := c.read("/llm/models/"+url.PathEscape(model), &st); err != nil {
		return catalog.Resources{}, err
	}
	res := catalog.Resources{}
	if st.Resources != nil {
		res = *st.Resources
	}
	if fl.Changed("memory") {
		n, err := humanize.ParseBytes(lf.memory)
		if err != nil {
			return catalog.Resources{}, fmt.Errorf("--memory %q: %v (use a size such as 8GiB)", lf.memory, err)
		}
		res.Memory = int64(n)
	}
	if fl.Changed("cores") {
		res.Cores = lf.cores
	}
	if fl.Changed("gpus") {
		res.GPUs = lf.gpus
	}
	return res, nil
}

// printRollout says what a live change or a restart replaced.
func (c *ctl) printRollout(out llmapi.Rollout) {
	fmt.Fprintf(c.out, "model %s: replaced %s with %s\n", out.Name, listOrNone(out.Replaced), listOrNone(out.Started))
	if out.OneAtATime {
		fmt.Fprintln(c.out, "the node had no room for a new replica beside an old one: they were replaced one at a time")
	}
	if out.Note != "" {
		fmt.Fprintln(c.out, out.Note)
	}
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func (c *ctl) modelRestart() *cobra.Command {
	return &cobra.Command{Use: "restart <model>", Short: "Replaces every replica of a model without downtime: new ones start and take requests when ready, the old drain", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var out llmapi.Rollout
			c.note = waitNote{what: "replacing the replicas of " + args[0], status: func() string { return c.replicaStatus(args[0]) }}
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/restart", nil, &out); err != nil || c.json {
				return err
			}
			c.printRollout(out)
			return nil
		}}
}
