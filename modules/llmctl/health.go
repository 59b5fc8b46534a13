package llmctl

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// modelTest is "llmgw ctl model test <model>": its connection tested now
// (POST /llm/models/<model>/test). It fails when no replica serves, so a
// script can tell.
func (c *ctl) modelTest() *cobra.Command {
	return &cobra.Command{Use: "test <model>", Short: "Tests a model's connection now: each replica is probed as its health check does (an outside provider: GET <base_url>/models with its key)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var res llmapi.ModelTest
			if err := c.call("POST", "/llm/models/"+url.PathEscape(args[0])+"/test", nil, &res); err != nil {
				return err
			}
			if c.json && !res.OK {
				return fmt.Errorf("model %s does not serve: %s", res.Model, res.Reason)
			} else if c.json {
				return nil
			}
			var rows [][]string
			for _, r := range res.Replicas {
				status := "-"
				if r.Status != 0 {
					status = strconv.Itoa(r.Status)
				}
				rows = append(rows, []string{r.Replica, r.State, status, fmt.Sprintf("%.0fms", r.LatencyMS), r.URL, r.Reason})
			}
			if len(rows) > 0 {
				c.table("REPLICA\tSTATE\tSTATUS\tLATENCY\tURL\tREASON", rows)
			}
			if !res.OK {
				return fmt.Errorf("model %s does not serve: %s", res.Model, res.Reason)
			}
			fmt.Fprintf(c.out, "model %s serves\n", res.Model)
			return nil
		}}
}
