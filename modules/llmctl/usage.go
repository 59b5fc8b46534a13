package llmctl

import (
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// usage is "llmgw ctl usage": requests, tokens and cost by model for one
// organisation, team, project or key, since --since ago.
func (c *ctl) usage() *cobra.Command {
	var org, team, project, key, since string
	cmd := &cobra.Command{Use: "usage", Short: "Shows usage by model for a node of the tenancy tree", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"org": org, "team": team, "project": project, "key": key} {
				if v != "" {
					q.Set(k, v)
				}
			}
			if len(q) != 1 {
				return fmt.Errorf("name one node: --org, --team org/team, --project org/team/project or --key id")
			}
			d, err := time.ParseDuration(since)
			if err != nil {
				return fmt.Errorf("--since %q: use a duration such as 24h", since)
			}
			q.Set("from", time.Now().Add(-d).UTC().Format(time.RFC3339))
			var u struct {
				Models map[string]llmapi.Usage `json:"models"`
				Total  llmapi.Usage            `json:"total"`
			}
			if err := c.call("GET", "/llm/usage?"+q.Encode(), nil, &u); err != nil || c.json {
				return err
			}
			var rows [][]string
			for m, x := range u.Models {
				rows = append(rows, usageRow(m, x))
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i][0] < rows[j][0] })
			c.table("MODEL\tREQUESTS\tINPUT TOKENS\tOUTPUT TOKENS\tCOST", append(rows, usageRow("(total)", u.Total)))
			return nil
		}}
	cmd.Flags().StringVar(&org, "org", "", "an organisation")
	cmd.Flags().StringVar(&team, "team", "", "a team: org/team")
	cmd.Flags().StringVar(&project, "project", "", "a project: org/team/project")
	cmd.Flags().StringVar(&key, "key", "", "a key id")
	cmd.Flags().StringVar(&since, "since", "24h", "how far back")
	return cmd
}

// usageRow is one row of the usage table; cost is in the catalog's currency.
func usageRow(name string, u llmapi.Usage) []string {
	return []string{name, fmt.Sprint(u.Requests), fmt.Sprint(u.InputTokens), fmt.Sprint(u.OutputTokens),
		fmt.Sprintf("%.4f", float64(u.CostMicros)/1e6)}
}

// cache is "llmgw ctl cache" and its purge: the response caches.
func (c *ctl) cache() *cobra.Command {
	cmd := &cobra.Command{Use: "cache", Short: "Shows cache entries and outcomes", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var stats []map[string]int64
			if err := c.call("GET", "/llm/cache", nil, &stats); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, s := range stats {
				rows = append(rows, []string{fmt.Sprint(s["entries"]), fmt.Sprint(s["bytes"]), fmt.Sprint(s["hits_exact"]),
					fmt.Sprint(s["hits_semantic"]), fmt.Sprint(s["misses"]), fmt.Sprint(s["bypass"])})
			}
			c.table("ENTRIES\tBYTES\tEXACT HITS\tSEMANTIC HITS\tMISSES\tBYPASSED", rows)
			return nil
		}}
	var model, scope string
	purge := &cobra.Command{Use: "purge", Short: "Removes cache entries of a model and/or scope (all without flags)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var out map[string]int
			if err := c.call("POST", "/llm/cache/purge", map[string]string{"model": model, "scope": scope}, &out); err != nil || c.json {
				return err
			}
			fmt.Fprintf(c.out, "purged %d entries\n", out["purged"])
			return nil
		}}
	purge.Flags().StringVar(&model, "model", "", "a catalog model")
	purge.Flags().StringVar(&scope, "scope", "", "a scope, such as p:org/team/project")
	cmd.AddCommand(purge)
	return cmd
}
