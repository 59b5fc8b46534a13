package llmctl

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// requestFilter is the flags of "llmgw ctl requests", the filters of GET
// /llm/requests.
type requestFilter struct {
	model, key, tenant, api, node, status, errCode, text, since, until, before string
	limit                                                                      int
}

func (f *requestFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"model": f.model, "key": f.key, "tenant": f.tenant, "api": f.api, "node": f.node,
		"status": f.status, "error": f.errCode, "q": f.text, "since": f.since, "until": f.until, "before": f.before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", strconv.Itoa(f.limit))
	return q
}

// requests is "llmgw ctl requests": the request log, newest first, or
// followed as requests come.
func (c *ctl) requests() *cobra.Command {
	var f requestFilter
	var follow bool
	var every time.Duration
	cmd := &cobra.Command{Use: "requests [--model M] [--key K] [--tenant T] [--status 5xx] [--since 1h] [--follow]",
		Short: "Shows the request log: who asked which model, how it ended, tokens, cost and latency", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p llmapi.RequestPage
			if !follow {
				if err := c.call("GET", "/llm/requests?"+f.query().Encode(), nil, &p); err != nil || c.json {
					return err
				}
			} else if err := c.read("/llm/requests?"+f.query().Encode(), &p); err != nil {
				return err
			}
			if !follow {
				c.requestTable(p.Data)
				if p.HasMore {
					fmt.Fprintf(c.out, "more: llmgw ctl requests --before %s (with the same filters)\n", p.Next)
				}
				return nil
			}
			slices.Reverse(p.Data)
			c.printRequests(p.Data, true)
			return c.followRequests(cmd, f, p.Newest, every)
		}}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "only requests that asked for or were served by this model")
	fl.StringVar(&f.key, "key", "", "only this key's requests (its id)")
	fl.StringVar(&f.tenant, "tenant", "", "only this tenant's requests, and those of the tenants below it (org, org/team or org/team/project)")
	fl.StringVar(&f.api, "api", "", "only this API's requests (chat/completions, responses, messages, embeddings, mcp, …)")
	fl.StringVar(&f.node, "node", "", "only requests this node took")
	fl.StringVar(&f.status, "status", "", "only this status (429), class (5xx) or error (400 and up)")
	fl.StringVar(&f.errCode, "error", "", "only this error code (rate_limit_exceeded, upstream_unreachable, …)")
	fl.StringVar(&f.text, "id", "", "only requests whose id contains this")
	fl.StringVar(&f.since, "since", "", "requests that ended this long ago or later (30m, 24h, 7d), or an RFC 3339 time")
	fl.StringVar(&f.until, "until", "", "requests that ended this long ago or earlier, or an RFC 3339 time")
	fl.StringVar(&f.before, "before", "", "the next page, as the previous one said")
	fl.IntVar(&f.limit, "limit", 50, "requests a page (at most 1000)")
	fl.BoolVarP(&follow, "follow", "f", false, "keep printing requests as they come")
	fl.DurationVar(&every, "every", time.Second, "with --follow, how often to ask")
	cmd.AddCommand(c.requestShow())
	return cmd
}

// followRequests prints the requests that come after cursor until the
// command is interrupted.
func (c *ctl) followRequests(cmd *cobra.Command, f requestFilter, cursor string, every time.Duration) error {
	f.before = ""
	for {
		select {
		case <-cmd.Context().Done():
			return nil
		case <-time.After(every):
		}
		q := f.query()
		q.Set("limit", "1000")
		if cursor != "" {
			q.Set("after", cursor)
		}
		var p llmapi.RequestPage
		if err := c.read("/llm/requests?"+q.Encode(), &p); err != nil {
			return err
		}
		if cursor == "" { // the log was empty: newest first, once
			slices.Reverse(p.Data)
			cursor = p.Newest
		} else if p.Next != "" {
			cursor = p.Next
		}
		c.printRequests(p.Data, false)
	}
}

func (c *ctl) requestTable(rs []llmapi.RequestRecord) {
	c.table("TIME\tID\tKEY\tTENANT\tMODEL\tSTATUS\tTOKENS\tCOST\tLATENCY\tTTFT\tCACHE\tGUARD", requestRowsOf(rs))
}

// printRequests prints followed requests: with --json one JSON object a
// line, else rows (under a header first).
func (c *ctl) printRequests(rs []llmapi.RequestRecord, header bool) {
	if c.json {
		enc := json.NewEncoder(c.out)
		for i := range rs {
			_ = enc.Encode(&rs[i])
		}
		return
	}
	if header {
		c.requestTable(rs)
		return
	}
	for _, r := range requestRowsOf(rs) {
		fmt.Fprintln(c.out, strings.Join(r, "  "))
	}
}

func requestRowsOf(rs []llmapi.RequestRecord) [][]string {
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		model := r.Model
		if r.Served != "" && r.Served != r.Model {
			model += " → " + r.Served
			if r.Route != "" {
				model += " (" + r.Route + ")"
			}
		}
		status := strconv.Itoa(r.Status)
		if r.Error != "" {
			status += " " + r.Error
		}
		rows = append(rows, []string{r.End.Local().Format(time.DateTime), r.ID, dash(r.KeyID), dash(r.Tenant), dash(model), status,
			fmt.Sprintf("%d/%d", r.PromptTokens, r.CompletionTokens), costOf(r.Cost), msOf(r.LatencyMS), msOf(r.TTFTMS), dash(r.Cache), dash(r.Guard)})
	}
	return rows
}

// requestShow is "llmgw ctl requests show ID": one request, with its
// bodies when kept.
func (c *ctl) requestShow() *cobra.Command {
	return &cobra.Command{Use: "show <request id>", Short: "Shows one request of the log, with its bodies when its tenant keeps them", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var d llmapi.RequestDetail
			if err := c.call("GET", "/llm/requests/"+url.PathEscape(args[0]), nil, &d); err != nil || c.json {
				return err
			}
			c.requestTable([]llmapi.RequestRecord{d.RequestRecord})
			for _, kv := range [][2]string{{"node", d.Node}, {"replica", d.Replica + " on " + d.ReplicaNode}, {"api", d.API}, {"kb", d.KB}, {"tool", d.Tool}} {
				if kv[1] != "" && kv[1] != " on " {
					fmt.Fprintf(c.out, "%s: %s\n", kv[0], kv[1])
				}
			}
			if d.RequestBody != "" {
				fmt.Fprintf(c.out, "\nrequest body:\n%s\n", d.RequestBody)
			}
			if d.ResponseBody != "" {
				fmt.Fprintf(c.out, "\nresponse body:\n%s\n", d.ResponseBody)
			}
			if d.BodiesTruncated {
				fmt.Fprintln(c.out, "(bodies cut at 64 KiB)")
			}
			return nil
		}}
}

func costOf(c float64) string {
	if c == 0 {
		return "-"
	}
	return strconv.FormatFloat(c, 'f', -1, 64)
}

func msOf(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	if ms >= 1000 {
		return strconv.FormatFloat(ms/1000, 'f', 2, 64) + "s"
	}
	return strconv.FormatFloat(ms, 'f', 0, 64) + "ms"
}
