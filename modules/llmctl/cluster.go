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

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// cluster is "llmgw ctl cluster": the whole cluster at once.
func (c *ctl) cluster() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "Shows, stops and starts every node of a cluster at once",
		Long: `Operates every node of a cluster at once, in a safe order.

stop drains the nodes one at a time, the leader last: each node's
replicas start on the nodes still serving before they stop on it, so
requests keep being answered until the last node is drained and its
replicas stop. The llmgw processes keep running (they take no replicas
and answer model requests with 503): stop them then with the service
manager (systemctl stop llmgw) if the machines go down. start undrains
them, the leader first, and waits until every model is placed.`,
		Example: "  $ llmgw ctl cluster status\n  $ llmgw ctl cluster stop\n  $ llmgw ctl cluster start --timeout 10m\n  $ llmgw ctl cluster upgrade ./llmgw_v0.16.0_linux_amd64.tar.gz"}
	var timeout time.Duration
	cmd.PersistentFlags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for one node's replicas to move or start")
	status := &cobra.Command{Use: "status", Short: "Lists the nodes with their release, state and replicas, and the models not placed", Args: cobra.NoArgs,
		Example: "  $ llmgw ctl cluster status\n  $ llmgw ctl cluster status --json",
		RunE:    func(*cobra.Command, []string) error { return c.clusterStatus() }}
	stop := &cobra.Command{Use: "stop", Short: "Drains every node, one at a time and the leader last, until no replica runs", Args: cobra.NoArgs,
		Example: "  $ llmgw ctl cluster stop\n  $ llmgw ctl cluster stop --timeout 15m",
		RunE:    func(*cobra.Command, []string) error { return c.clusterStop(timeout) }}
	start := &cobra.Command{Use: "start", Short: "Undrains every node, the leader first, and waits until every model is placed", Args: cobra.NoArgs,
		Example: "  $ llmgw ctl cluster start",
		RunE:    func(*cobra.Command, []string) error { return c.clusterStart(timeout) }}
	cmd.AddCommand(status, stop, start, c.clusterUpgrade(&timeout))
	return cmd
}

// clusterNodes reads GET /llm/nodes whatever --json says.
func (c *ctl) clusterNodes() (llmapi.NodesStatus, error) {
	var st llmapi.NodesStatus
	err := c.read("/llm/nodes", &st)
	if err == nil && st.Cluster == "" && len(st.Nodes) == 0 {
		err = fmt.Errorf("this llmgw is not in a cluster (its llm config has no cluster block): llmgw ctl models shows its models")
	}
	return st, err
}

func (c *ctl) clusterStatus() error {
	st, err := c.clusterNodes()
	if err != nil {
		return err
	}
	if c.json {
		return c.call("GET", "/llm/nodes", nil, nil)
	}
	fmt.Fprintf(c.out, "cluster %s, store %s, leader %s\n", st.Cluster, st.Store, cmp.Or(st.Leader, "(none)"))
	if st.StoreError != "" {
		fmt.Fprintln(c.out, "warning:", st.StoreError)
	}
	var rows [][]string
	for _, n := range sortedNodes(st) {
		state := "serving"
		if n.Drained {
			state = "drained"
			if len(n.Replicas) == 0 {
				state = "stopped"
			}
		}
		rows = append(rows, []string{n.Name, cmp.Or(n.Version, "-"), state, fmt.Sprint(len(n.Replicas)), n.Age})
	}
	c.table("NODE\tVERSION\tSTATE\tREPLICAS\tHEARTBEAT AGE", rows)
	if line := versionsLine(st.Versions); line != "" {
		fmt.Fprintln(c.out, line)
	}
	for _, m := range slices.Sorted(maps.Keys(st.Unplaced)) {
		fmt.Fprintf(c.out, "not fully placed: %s: %s\n", m, st.Unplaced[m])
	}
	return nil
}

// sortedNodes are the nodes by name, the leader last.
func sortedNodes(st llmapi.NodesStatus) []llmapi.NodeInfo {
	ns := slices.Clone(st.Nodes)
	slices.SortFunc(ns, func(a, b llmapi.NodeInfo) int {
		if (a.Name == st.Leader) != (b.Name == st.Leader) {
			if a.Name == st.Leader {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return ns
}

// clusterStop drains the nodes one by one, the leader last, waiting
// each time until the drained node holds no replica.
func (c *ctl) clusterStop(timeout time.Duration) error {
	st, err := c.clusterNodes()
	if err != nil {
		return err
	}
	for _, n := range sortedNodes(st) {
		if !n.Drained {
			if err := c.send("POST", "/llm/nodes/"+url.PathEscape(n.Name)+"/drain"); err != nil {
				return fmt.Errorf("draining %s: %w; the nodes before it are drained: llmgw ctl cluster start undoes it", n.Name, err)
			}
		}
		what := fmt.Sprintf("node %s: replicas moving off it", n.Name)
		if err := c.waitNodes(what, timeout, func(st llmapi.NodesStatus) (bool, string) {
			r, _ := replicasOn(st, n.Name)
			return r == 0, fmt.Sprintf("%d replicas left", r)
		}); err != nil {
			return fmt.Errorf("%w; the nodes before it are drained: llmgw ctl cluster start undoes it", err)
		}
		c.say("node %s drained", n.Name)
	}
	c.say("cluster stopped: no node takes replicas; llmgw ctl cluster start starts it again")
	return nil
}

// clusterStart undrains the nodes, the leader first, then waits until
// every model is placed.
func (c *ctl) clusterStart(timeout time.Duration) error {
	st, err := c.clusterNodes()
	if err != nil {
		return err
	}
	ns := sortedNodes(st)
	slices.Reverse(ns)
	for _, n := range ns {
		if n.Drained {
			if err := c.send("POST", "/llm/nodes/"+url.PathEscape(n.Name)+"/undrain"); err != nil {
				return fmt.Errorf("undraining %s: %w", n.Name, err)
			}
			c.say("node %s undrained", n.Name)
		}
	}
	err = c.waitNodes("models being placed", timeout, func(st llmapi.NodesStatus) (bool, string) {
		return len(st.Unplaced) == 0 && !anyDrained(st), fmt.Sprintf("%d models not fully placed", len(st.Unplaced))
	})
	if err != nil {
		return err
	}
	c.say("cluster started: every model is placed")
	return nil
}

// send sends a change without printing its answer, whatever --json says.
func (c *ctl) send(method, path string) error {
	asJSON := c.json
	c.json = false
	defer func() { c.json = asJSON }()
	return c.call(method, path, nil, nil)
}

// say prints a line of a command's progress: on stdout, or stderr with
// --json (whose stdout is for JSON).
func (c *ctl) say(format string, a ...any) {
	w := c.out
	if c.json {
		w = c.errOut
	}
	fmt.Fprintf(w, format+"\n", a...)
}

// waitNodes polls GET /llm/nodes until done says so, showing what it
// waits for (during) once a second has passed.
func (c *ctl) waitNodes(what string, timeout time.Duration, done func(llmapi.NodesStatus) (bool, string)) error {
	var left atomic.Value // string: what done last said, or the read's error
	left.Store("")
	stop := c.during(what, func() string { return left.Load().(string) })
	defer stop()
	deadline := time.Now().Add(timeout)
	for ; ; time.Sleep(250 * time.Millisecond) {
		var st llmapi.NodesStatus
		err := c.peek("/llm/nodes", &st) // a read that shows no wait of its own
		s := fmt.Sprint(err)
		if err == nil {
			var ok bool
			if ok, s = done(st); ok {
				return nil
			}
		}
		left.Store(s)
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not done after %s (%s); --timeout waits longer", what, timeout, s)
		}
	}
}

func anyDrained(st llmapi.NodesStatus) bool {
	return slices.ContainsFunc(st.Nodes, func(n llmapi.NodeInfo) bool { return n.Drained })
}
