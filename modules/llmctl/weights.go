package llmctl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// weights is "llmgw ctl weights" and its prune: the left-over files of
// the node's weights directory.
func (c *ctl) weights() *cobra.Command {
	var nodeName string
	var all bool
	cmd := &cobra.Command{Use: "weights [--node N] [--all]", Short: "Lists the files in the node's weights directory that no catalog model uses, with their size", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var out struct {
				Nodes []llmapi.NodeWeights `json:"nodes"`
			}
			if err := c.call("GET", "/llm/weights"+nodeQuery(nodeName, false), nil, &out); err != nil {
				return err
			}
			var rows [][]string
			var silent []string
			for _, n := range out.Nodes {
				if n.Error != "" {
					silent = append(silent, n.Node)
					if !c.json {
						fmt.Fprintf(c.out, "%s: not answered: %s\n", n.Node, n.Error)
					}
					continue
				}
				if c.json {
					continue
				}
				if n.Note != "" {
					fmt.Fprintf(c.out, "%s: %s\n", n.Node, n.Note)
				}
				for _, e := range n.Unused {
					rows = append(rows, weightsRow(n.Node, e, "unused"))
				}
				if all {
					for _, e := range n.Used {
						rows = append(rows, weightsRow(n.Node, e, "used by "+strings.Join(e.UsedBy, ",")+e.Why))
					}
				}
				fmt.Fprintf(c.out, "%s: %s unused, %s used, in %s\n", n.Node, humanize.IBytes(uint64(n.UnusedBytes)), humanize.IBytes(uint64(n.UsedBytes)), n.Dir)
			}
			if !c.json {
				c.table("NODE\tPATH\tSIZE\tFILES\tSTATE", rows)
			}
			if len(silent) > 0 {
				return fmt.Errorf("nodes %s did not answer; the list lacks their weights", strings.Join(silent, ", "))
			}
			return nil
		}}
	cmd.PersistentFlags().StringVar(&nodeName, "node", "", "only this node of the cluster (default: every live node)")
	cmd.Flags().BoolVar(&all, "all", false, "list the used files too")
	cmd.AddCommand(c.weightsPrune(&nodeName))
	return cmd
}

// weightsPrune is ctl weights prune; node is the --node of ctl weights.
func (c *ctl) weightsPrune(node *string) *cobra.Command {
	var dryRun bool
	prune := &cobra.Command{Use: "prune [--node N] [--dry-run]", Short: "Removes the files of the node's weights directory that no catalog model uses (never what a replica holds or a fetch brings in)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var out struct {
				Nodes []llmapi.WeightsPruned `json:"nodes"`
			}
			if err := c.call("POST", "/llm/weights/prune"+nodeQuery(*node, dryRun), map[string]bool{"dry_run": dryRun}, &out); err != nil {
				return err
			}
			if c.json {
				return pruneFailures(out.Nodes)
			}
			verb := "removed"
			if dryRun {
				verb = "would remove"
			}
			failed := 0
			for _, n := range out.Nodes {
				switch {
				case n.Error != "":
					fmt.Fprintf(c.out, "%s: not pruned: %s\n", n.Node, n.Error)
					failed++
					continue
				case n.Note != "":
					fmt.Fprintf(c.out, "%s: %s\n", n.Node, n.Note)
					continue
				}
				for _, e := range n.Removed {
					fmt.Fprintf(c.out, "%s: %s %s (%s)\n", n.Node, verb, e.Path, humanize.IBytes(uint64(e.Size)))
				}
				fmt.Fprintf(c.out, "%s: %s %d entries, %s\n", n.Node, verb, len(n.Removed), humanize.IBytes(uint64(n.Freed)))
			}
			if failed > 0 {
				return fmt.Errorf("%d nodes were not pruned", failed)
			}
			return nil
		}}
	prune.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be removed; remove nothing")
	return prune
}

func weightsRow(node string, e llmapi.WeightsEntry, state string) []string {
	return []string{node, e.Path, humanize.IBytes(uint64(e.Size)), fmt.Sprint(e.Files), state}
}

// nodeQuery is the query of a weights route: ?node= and ?dry_run=.
func nodeQuery(node string, dryRun bool) string {
	q := url.Values{}
	if node != "" {
		q.Set("node", node)
	}
	if dryRun {
		q.Set("dry_run", "true")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// pruneFailures is the error of a prune some nodes did not do.
func pruneFailures(nodes []llmapi.WeightsPruned) error {
	failed := 0
	for _, n := range nodes {
		if n.Error != "" {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d nodes were not pruned", failed)
	}
	return nil
}
