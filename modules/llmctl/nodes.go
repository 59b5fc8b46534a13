package llmctl

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// nodes is "llmgw ctl nodes" (or "node") and its drain and undrain.
func (c *ctl) nodes() *cobra.Command {
	cmd := &cobra.Command{Use: "nodes", Aliases: []string{"node"}, Short: "Lists the cluster's nodes: heartbeat, capacity, use and replicas", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var st llmapi.NodesStatus
			if err := c.call("GET", "/llm/nodes", nil, &st); err != nil || c.json {
				return err
			}
			if st.StoreError != "" {
				fmt.Fprintln(c.out, "warning:", st.StoreError)
			}
			var rows [][]string
			for _, n := range st.Nodes {
				var flags []string
				if n.Self {
					flags = append(flags, "self")
				}
				if n.Leader {
					flags = append(flags, "leader")
				}
				if n.Drained {
					flags = append(flags, "drained")
				}
				rows = append(rows, []string{n.Name, cmp.Or(n.Version, "-"), n.Address, n.Age, fmt.Sprintf("%d/%d", n.Used.Cores, n.Capacity.Cores),
					fmt.Sprintf("%s/%s", humanize.IBytes(uint64(max(n.Used.Memory, 0))), humanize.IBytes(uint64(max(n.Capacity.Memory, 0)))),
					fmt.Sprint(len(n.Replicas)), strings.Join(flags, ",")})
			}
			c.table("NODE\tVERSION\tADDRESS\tHEARTBEAT AGE\tCORES\tMEMORY\tREPLICAS\t", rows)
			if line := versionsLine(st.Versions); line != "" {
				fmt.Fprintln(c.out, line)
			}
			for m, why := range st.Unplaced {
				fmt.Fprintf(c.out, "not fully placed: %s: %s\n", m, why)
			}
			return nil
		}}
	for _, action := range []string{"drain", "undrain"} {
		short := "Drains a node: its replicas start on other nodes, then stop there; it takes no new ones"
		if action == "undrain" {
			short = "Lets a drained node take replicas again"
		}
		cmd.AddCommand(&cobra.Command{Use: action + " <node>", Short: short, Args: cobra.ExactArgs(1),
			RunE: func(_ *cobra.Command, args []string) error {
				if err := c.call("POST", "/llm/nodes/"+url.PathEscape(args[0])+"/"+action, nil, nil); err != nil || c.json {
					return err
				}
				fmt.Fprintf(c.out, "node %s %sed\n", args[0], action)
				return nil
			}})
	}
	return cmd
}

// versionsLine says which nodes run which llmgw release when they run
// more than one; "" when they all run the same.
func versionsLine(by map[string][]string) string {
	if len(by) < 2 {
		return ""
	}
	vs := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v + " on " + strings.Join(by[v], ", ")
	}
	return "warning: the nodes run different llmgw releases: " + strings.Join(parts, "; ") +
		" (an upgrade under way, or a node left behind: llmgw ctl cluster upgrade)"
}
