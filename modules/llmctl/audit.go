package llmctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// audit is "llmgw ctl audit": the changes made through the admin API,
// newest first.
func (c *ctl) audit() *cobra.Command {
	var since, until, actor, action, model, cursor string
	var limit int
	cmd := &cobra.Command{Use: "audit [--since 1h] [--actor A] [--action A] [--model M]", Short: "Shows the audit log: who changed what through the admin API, newest first", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			q := url.Values{}
			for k, v := range map[string]string{"since": since, "until": until, "actor": actor, "action": action, "model": model, "cursor": cursor} {
				if v != "" {
					q.Set(k, v)
				}
			}
			q.Set("limit", strconv.Itoa(limit))
			var p llmapi.AuditPage
			if err := c.call("GET", "/llm/audit?"+q.Encode(), nil, &p); err != nil || c.json {
				return err
			}
			if p.Warning != "" {
				fmt.Fprintln(c.out, "warning:", p.Warning)
			}
			var rows [][]string
			for _, e := range p.Entries {
				rows = append(rows, []string{e.Time.Local().Format(time.DateTime), e.Node, e.Actor, e.Action, auditFields(e.Fields)})
			}
			c.table("TIME\tNODE\tACTOR\tACTION\tFIELDS", rows)
			if p.Next != "" {
				fmt.Fprintf(c.out, "more: llmgw ctl audit --cursor %s (with the same filters)\n", p.Next)
			}
			return nil
		}}
	cmd.Flags().StringVar(&since, "since", "", "entries from this long ago (such as 1h or 7d), or from an RFC 3339 time")
	cmd.Flags().StringVar(&until, "until", "", "entries up to this long ago, or to an RFC 3339 time")
	cmd.Flags().StringVar(&actor, "actor", "", "only this actor's changes")
	cmd.Flags().StringVar(&action, "action", "", "only actions containing this, such as \"model\" or \"key created\"")
	cmd.Flags().StringVar(&model, "model", "", "only changes of this model")
	cmd.Flags().StringVar(&cursor, "cursor", "", "the next page, as the previous one said")
	cmd.Flags().IntVar(&limit, "limit", 50, "entries a page (at most 1000)")
	return cmd
}

// auditFields prints an entry's fields as key=value, sorted.
func auditFields(f map[string]any) string {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := f[k]
		if _, ok := v.(string); !ok {
			b, _ := json.Marshal(v)
			v = string(b)
		}
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	return strings.Join(parts, " ")
}
