package llmctl

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

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
	cmd.AddCommand(c.nodeDrain(), c.nodeAction("undrain", "Lets a drained node take replicas again"))
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

// nodeAction is "ctl nodes drain" or "undrain" without waiting.
func (c *ctl) nodeAction(action, short string) *cobra.Command {
	return &cobra.Command{Use: action + " <node>", Short: short, Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("POST", "/llm/nodes/"+url.PathEscape(args[0])+"/"+action, nil, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "node %s %sed\n", args[0], action)
			return nil
		}}
}

// nodeDrain is "ctl nodes drain [--wait]": with --wait it returns when
// the node holds no replicas, showing how many are left.
func (c *ctl) nodeDrain() *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := c.nodeAction("drain", "Drains a node: its replicas start on other nodes, then stop there; it takes no new ones")
	run := cmd.RunE
	cmd.RunE = func(cc *cobra.Command, args []string) error {
		if err := run(cc, args); err != nil || !wait {
			return err
		}
		return c.waitDrained(args[0], timeout)
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the node holds no replicas, showing how many are left")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Minute, "with --wait: how long to wait before failing")
	return cmd
}

// waitDrained polls GET /llm/nodes until the node holds no replicas.
func (c *ctl) waitDrained(node string, timeout time.Duration) error {
	var left atomic.Int64 // read by the progress line
	left.Store(-1)
	stop := c.during("draining node "+node, func() string {
		if n := left.Load(); n >= 0 {
			return fmt.Sprintf("%d replicas left", n)
		}
		return ""
	})
	defer stop()
	deadline := time.Now().Add(timeout)
	for {
		var st llmapi.NodesStatus
		if err := c.peek("/llm/nodes", &st); err != nil {
			return fmt.Errorf("waiting for node %s to drain: reading the nodes: %w; the drain goes on, see llmgw ctl nodes", node, err)
		}
		n, found := replicasOn(st, node)
		if !found {
			return fmt.Errorf("waiting for node %s to drain: the cluster has no such node any more; see llmgw ctl nodes", node)
		}
		left.Store(int64(n))
		if n == 0 {
			stop()
			if !c.json {
				fmt.Fprintf(c.out, "node %s holds no replicas\n", node)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s still holds %d replicas after %s; the drain goes on (llmgw ctl nodes shows where they are), wait longer with --timeout", node, n, timeout)
		}
		time.Sleep(c.pace.or().polls)
	}
}

// replicasOn counts the replicas a node holds.
func replicasOn(st llmapi.NodesStatus, node string) (int, bool) {
	for _, n := range st.Nodes {
		if n.Name == node {
			return len(n.Replicas), true
		}
	}
	return 0, false
}
