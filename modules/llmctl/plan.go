package llmctl

import (
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// modelPlan is llmgw ctl model plan: where a model's replicas would go,
// without changing anything.
func (c *ctl) modelPlan() *cobra.Command {
	var file string
	var noCheck bool
	cmd := &cobra.Command{Use: "plan -f <model.yaml|model.json> [--no-check-source]",
		Short: "Says where a model's replicas would go, what would be stopped for them and what is missing, without changing anything",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			m, err := modelBody(file, noCheck)
			if err != nil {
				return err
			}
			var pl llmapi.Plan
			if err := c.call("POST", "/llm/plan", m, &pl); err != nil || c.json {
				return err
			}
			c.printPlan(pl)
			return nil
		}}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the model, in YAML or JSON")
	cmd.Flags().BoolVar(&noCheck, "no-check-source", false, "plan it without checking its source")
	return cmd
}

func (c *ctl) printPlan(pl llmapi.Plan) {
	verdict := "fits"
	if !pl.Fits {
		verdict = "does not fit"
	}
	fmt.Fprintf(c.out, "model %s %s%s\n", pl.Model, verdict, sourceLine(pl.SourceCheck))
	for i, r := range pl.Replicas {
		gpus := ""
		if len(r.GPUs) > 0 {
			gpus = " on GPUs " + devicesCol(r.GPUs)
		}
		profile := ""
		if r.Profile != "" {
			profile = ", profile " + r.Profile
		}
		fmt.Fprintf(c.out, "  replica %d on node %s%s: %s%s\n", i+1, r.Node, profile, amountsText(r.Resources), gpus)
		if r.Note != "" {
			fmt.Fprintf(c.out, "    %s\n", r.Note)
		}
	}
	for _, e := range pl.Evict {
		fmt.Fprintf(c.out, "  stops %s replica %s of %s (frees %s)\n", e.Class, e.Replica, e.Model, amountsText(e.Resources))
	}
	if pl.Missing != nil {
		fmt.Fprintf(c.out, "  missing: %s; %s\n", amountsText(*pl.Missing), pl.Reason)
	} else if !pl.Fits && pl.Reason != "" {
		fmt.Fprintf(c.out, "  %s\n", pl.Reason)
	}
	if pl.Note != "" {
		fmt.Fprintf(c.out, "  note: %s\n", pl.Note)
	}
	if pl.SourceError != "" {
		fmt.Fprintf(c.out, "  source refused: %s\n", pl.SourceError)
	}
}

func amountsText(a llmapi.Amounts) string {
	var parts []string
	if a.Memory != 0 {
		parts = append(parts, humanize.IBytes(uint64(a.Memory))+" memory")
	}
	if a.Cores != 0 {
		parts = append(parts, fmt.Sprintf("%d cores", a.Cores))
	}
	if a.GPUs != 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", a.GPUs))
	}
	if len(parts) == 0 {
		return "no resources declared"
	}
	return strings.Join(parts, ", ")
}

// sourceLine tells what the source check found, for one line of output.
func sourceLine(sc *llmapi.SourceCheck) string {
	switch {
	case sc == nil:
		return ""
	case !sc.Checked:
		return " (source not checked: " + sc.Note + ")"
	case sc.Size > 0:
		return fmt.Sprintf(" (source %s: %s %s, %s)", sc.Source, sc.Kind, sc.Format, humanize.IBytes(uint64(sc.Size)))
	}
	return fmt.Sprintf(" (source %s: %s %s)", sc.Source, sc.Kind, sc.Format)
}
