package llmctl

import (
	"fmt"
	"net/url"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// modelUpdateCommands are ctl model updates, update and rollback: a
// model served from a tracked registry repository, checked and moved to
// another version without downtime.
func (c *ctl) modelUpdateCommands() []*cobra.Command {
	var check bool
	var wait time.Duration // set on c only when update or rollback runs
	updates := &cobra.Command{Use: "updates <model>", Short: "Shows a model's current version and whether its registry repository has a newer commit (as of the last scheduled check; --check asks now)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path := "/llm/models/" + url.PathEscape(args[0]) + "/updates"
			if check {
				path += "?check=true"
			}
			var u llmapi.ModelUpdates
			if err := c.call("GET", path, nil, &u); err != nil || c.json {
				return err
			}
			c.printUpdates(u)
			return nil
		}}
	updates.Flags().BoolVar(&check, "check", false, "ask the registry now instead of showing the last check")
	update := &cobra.Command{Use: "update <model>", Short: "Fetches the new commit of a model's registry repository beside its current files, checks it, makes it current and replaces the replicas one at a time without downtime", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c.timeout = wait
			return c.versionChange(args[0], "update")
		}}
	rollback := &cobra.Command{Use: "rollback <model>", Short: "Returns a model to its previous version, replacing the replicas one at a time without downtime", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			c.timeout = wait
			return c.versionChange(args[0], "rollback")
		}}
	for _, cmd := range []*cobra.Command{update, rollback} {
		cmd.Flags().DurationVar(&wait, "timeout", 30*time.Minute, "how long to wait for the new version to be fetched and the replicas replaced")
	}
	return []*cobra.Command{updates, update, rollback}
}

func (c *ctl) versionChange(model, action string) error {
	var out llmapi.VersionRollout
	c.note = waitNote{what: action + " of model " + model, status: c.updateStatus(model)}
	if err := c.call("POST", "/llm/models/"+url.PathEscape(model)+"/"+action, nil, &out); err != nil || c.json {
		return err
	}
	fmt.Fprintf(c.out, "model %s: version %s → %s\n", out.Name, out.From, out.To)
	c.printRollout(out.Rollout)
	return nil
}

func (c *ctl) printUpdates(u llmapi.ModelUpdates) {
	fmt.Fprintf(c.out, "model %s (mirror model %s) follows %s\n", u.Model, u.MirrorModel, orDash(u.Repository))
	fmt.Fprintf(c.out, "current:  %s (commit %s)\n", orDash(u.Current), orDash(u.CurrentCommit))
	if u.Previous != "" {
		fmt.Fprintf(c.out, "previous: %s\n", u.Previous)
	}
	switch {
	case u.UpdateAvailable:
		fmt.Fprintf(c.out, "update available: commit %s (llmgw ctl model update %s)\n", u.Available, u.Model)
	case u.Available != "":
		fmt.Fprintln(c.out, "up to date")
	}
	if u.CheckedAt != nil {
		fmt.Fprintf(c.out, "checked %s ago", time.Since(*u.CheckedAt).Round(time.Second))
	} else {
		fmt.Fprint(c.out, "not checked yet")
	}
	fmt.Fprintf(c.out, "; checks: %s\n", u.Every)
	if u.Error != "" {
		fmt.Fprintf(c.out, "error: %s\n", u.Error)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
