package llmctl

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// modelAdapter is "llmgw ctl model adapter": a model's LoRA adapters,
// listed, added and removed. Adding or removing one replaces the model's
// replicas without downtime (POST /llm/models/<name>/settings).
func (c *ctl) modelAdapter() *cobra.Command {
	cmd := &cobra.Command{Use: "adapter", Short: "Lists, adds and removes a model's LoRA adapters, each served under its own name"}
	cmd.AddCommand(c.adapterList(), c.adapterAdd(), c.adapterRemove())
	return cmd
}

// adapters reads a model's adapters, whatever --json prints.
func (c *ctl) adapters(model string) ([]*catalog.Adapter, error) {
	var st llmapi.ModelStatus
	err := c.read("/llm/models/"+url.PathEscape(model), &st)
	return st.Adapters, err
}

// setAdapters replaces a model's adapters and says what was replaced.
func (c *ctl) setAdapters(model string, as []*catalog.Adapter) error {
	if as == nil {
		as = []*catalog.Adapter{}
	}
	var out llmapi.Rollout
	c.note = waitNote{what: "changing the adapters of " + model, status: func() string { return c.replicaStatus(model) }}
	if err := c.call("POST", "/llm/models/"+url.PathEscape(model)+"/settings", map[string]any{"adapters": as}, &out); err != nil || c.json {
		return err
	}
	c.printRollout(out)
	return nil
}

// adapterList is ctl model adapter list; a scale of 0 shows as 1.
func (c *ctl) adapterList() *cobra.Command {
	return &cobra.Command{Use: "list <model>", Short: "Lists a model's adapters: name, source, scale", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			as, err := c.adapters(args[0])
			if err != nil {
				return err
			}
			if c.json {
				if as == nil {
					as = []*catalog.Adapter{}
				}
				return c.print(as)
			}
			var rows [][]string
			for _, a := range as {
				scale := "1"
				if a.Scale != 0 {
					scale = strconv.FormatFloat(a.Scale, 'g', -1, 64)
				}
				rows = append(rows, []string{a.Name, a.Source, scale})
			}
			c.table("NAME\tSOURCE\tSCALE", rows)
			return nil
		}}
}

// adapterAdd is ctl model adapter add; a name the model has is refused.
func (c *ctl) adapterAdd() *cobra.Command {
	var scale float64
	add := &cobra.Command{Use: "add <model> <name> <source>", Short: "Adds an adapter served as <name> (a path, or mirror://model/version); replaces the model's replicas without downtime", Args: cobra.ExactArgs(3),
		RunE: func(_ *cobra.Command, args []string) error {
			as, err := c.adapters(args[0])
			if err != nil {
				return err
			}
			if slices.ContainsFunc(as, func(a *catalog.Adapter) bool { return a.Name == args[1] }) {
				return fmt.Errorf("model %s already has adapter %s; remove it first to change it", args[0], args[1])
			}
			return c.setAdapters(args[0], append(as, &catalog.Adapter{Name: args[1], Source: args[2], Scale: scale}))
		}}
	add.Flags().Float64Var(&scale, "scale", 0, "how strongly it applies (llamacpp; default 1)")
	return add
}

// adapterRemove is ctl model adapter remove.
func (c *ctl) adapterRemove() *cobra.Command {
	return &cobra.Command{Use: "remove <model> <name>", Short: "Removes an adapter; replaces the model's replicas without downtime", Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			as, err := c.adapters(args[0])
			if err != nil {
				return err
			}
			n := len(as)
			as = slices.DeleteFunc(as, func(a *catalog.Adapter) bool { return a.Name == args[1] })
			if len(as) == n {
				return fmt.Errorf("model %s has no adapter %s (llmgw ctl model adapter list %s shows them)", args[0], args[1], args[0])
			}
			return c.setAdapters(args[0], as)
		}}
}
