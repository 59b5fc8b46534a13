package llmctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// keys is "llmgw ctl keys": the API keys, never their secrets, and
// create, revoke, rotate and limits.
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
			c.table("KEY\tPROJECT\tSOURCE\tSTATE", rows)
			return nil
		}}
	cmd.AddCommand(c.keyCreate(), c.keyRevoke(), c.keyRotate(), c.keyLimits())
	return cmd
}

// keyCreate is ctl keys create: the secret is printed once.
func (c *ctl) keyCreate() *cobra.Command {
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
			fmt.Fprintf(c.out, "key %s in %s\nsecret: %s\n(the secret is shown only now)\n", k.ID, k.Project, k.Secret)
			return nil
		}}
	create.Flags().StringVar(&project, "project", "", "org/team/project")
	create.Flags().StringVar(&id, "id", "", "the key's id (default: generated)")
	return create
}

// keyRevoke is ctl keys revoke.
func (c *ctl) keyRevoke() *cobra.Command {
	return &cobra.Command{Use: "revoke <id>", Short: "Revokes a key created at runtime", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("DELETE", "/llm/keys/"+url.PathEscape(args[0]), nil, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "key %s revoked\n", args[0])
			return nil
		}}
}

// keyRotate is ctl keys rotate: the new secret is printed once.
func (c *ctl) keyRotate() *cobra.Command {
	return &cobra.Command{Use: "rotate <id>", Short: "Issues a new secret for a key; the old one stops working", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var k llmapi.KeyInfo
			if err := c.call("POST", "/llm/keys/"+url.PathEscape(args[0])+"/rotate", nil, &k); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "key %s rotated\nsecret: %s\n(the secret is shown only now)\n", k.ID, k.Secret)
			return nil
		}}
}

// keyLimits is ctl keys limits: the key's own limits, replaced whole.
// Only its own flags count as limits given: --admin, --url or --json alone
// would otherwise send no limits, which removes them.
func (c *ctl) keyLimits() *cobra.Command {
	var lim tenancy.Limits
	var clear bool
	limits := &cobra.Command{Use: "limits <id>", Short: "Replaces the limits of a key created at runtime (--clear removes them)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			given := false
			cmd.LocalFlags().VisitAll(func(f *pflag.Flag) { given = given || f.Changed })
			if !clear && !given {
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
			fmt.Fprintf(c.out, "key %s limits: %s\n", k.ID, b)
			return nil
		}}
	f := limits.Flags()
	f.Int64Var(&lim.RequestsPerMinute, "requests-per-minute", 0, "requests in each clock minute")
	f.Int64Var(&lim.TokensPerMinute, "tokens-per-minute", 0, "prompt plus completion tokens in each clock minute")
	f.Int64Var(&lim.TokensPerDay, "tokens-per-day", 0, "tokens in each UTC day")
	f.Int64Var(&lim.MaxConcurrent, "max-concurrent", 0, "requests in flight")
	f.Int64Var(&lim.MaxOutput, "max-output", 0, "tokens one answer may have (below the model's max_output to matter)")
	f.Int64Var(&lim.JobsPerDay, "jobs-per-day", 0, "jobs (workflows, image generations) accepted in each UTC day")
	f.Int64Var(&lim.ConcurrentJobs, "concurrent-jobs", 0, "jobs running at once; more wait queued")
	f.Int64Var(&lim.GPUSecondsPerDay, "gpu-seconds-per-day", 0, "seconds jobs ran times their replicas' GPUs, in each UTC day")
	f.Float64Var(&lim.Budget, "budget", 0, "spending per budget period, in the catalog's currency")
	f.StringVar(&lim.BudgetPeriod, "budget-period", "", "day or month (default month)")
	f.StringSliceVar(&lim.Models, "models", nil, "models the key may use (names or globs, comma-separated)")
	f.BoolVar(&clear, "clear", false, "remove the key's own limits")
	return limits
}
