package llmctl

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// peers is "llmgw ctl peers": the peer gateways and their health.
func (c *ctl) peers() *cobra.Command {
	return &cobra.Command{Use: "peers", Aliases: []string{"peer"}, Short: "Lists the peer gateways (federation): state, why one is down, the models each lists here", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var list []llmapi.PeerStatus
			if err := c.call("GET", "/llm/peers", nil, &list); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, p := range list {
				checked := "never"
				if !p.Checked.IsZero() {
					checked = time.Since(p.Checked).Round(time.Second).String() + " ago"
				}
				rows = append(rows, []string{p.Name, p.URL, p.State, checked, cmp.Or(strings.Join(p.Models, ","), "-"), cmp.Or(p.Reason, "-")})
			}
			c.table("PEER\tURL\tSTATE\tCHECKED\tMODELS\tREASON", rows)
			if len(list) == 0 {
				fmt.Fprintln(c.out, "no peers; a peer block in the llm global option adds one (see docs/federation.md)")
			}
			return nil
		}}
}
