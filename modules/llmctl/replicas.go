package llmctl

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// replicas is "llmgw ctl replicas" and its restart.
func (c *ctl) replicas() *cobra.Command {
	restart := &cobra.Command{Use: "restart <replica>", Short: "Replaces one replica with a new one", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := c.call("POST", "/llm/replicas/"+url.PathEscape(args[0])+"/restart", nil, nil); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "replica %s restarting\n", args[0])
			return nil
		}}
	cmd := c.replicaList()
	cmd.AddCommand(restart)
	return cmd
}

// replicaList lists every model's replicas.
func (c *ctl) replicaList() *cobra.Command {
	return &cobra.Command{Use: "replicas", Short: "Lists the replicas of every model", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var ms []llmapi.ModelStatus
			if err := c.call("GET", "/llm/models", nil, &ms); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, m := range ms {
				for _, r := range m.Replicas {
					rows = append(rows, []string{r.ID, m.Name, r.State, r.Node, r.URL, fmt.Sprint(r.PID), devicesCol(r.GPUs), fmt.Sprint(r.Inflight),
						time.Since(r.Started).Round(time.Second).String()})
				}
			}
			c.table("REPLICA\tMODEL\tSTATE\tNODE\tURL\tPID\tGPUS\tIN FLIGHT\tUP", rows)
			return nil
		}}
}

// engines is "llmgw ctl engines": every engine, running (for a model)
// or installed, or why it cannot run here, sorted by type.
func (c *ctl) engines() *cobra.Command {
	return &cobra.Command{Use: "engines", Short: "Lists the engine plugins", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var es []llmapi.EngineStatus
			if err := c.call("GET", "/llm/engines", nil, &es); err != nil || c.json {
				return err
			}
			sort.Slice(es, func(i, j int) bool { return es[i].Type < es[j].Type })
			var rows [][]string
			for _, e := range es {
				state, pid := "installed", "-"
				switch {
				case e.Running:
					state, pid = "running", fmt.Sprint(e.PID)
				case e.Error != "":
					state = "cannot run"
				}
				rows = append(rows, []string{e.Type, e.Version, state, pid, strings.Join(e.Capabilities, ","), strings.Join(e.Formats, ","), e.Error})
			}
			c.table("ENGINE\tVERSION\tSTATE\tPID\tCAPABILITIES\tFORMATS\tNOTE", rows)
			return nil
		}}
}

// devicesCol shows a replica's GPU devices in a table: 0,1, or - for none.
func devicesCol(ds []int) string {
	if len(ds) == 0 {
		return "-"
	}
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}
