package llmctl

import (
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// providers is "llmgw ctl providers [model]": the live state of the
// providers of the models served by several.
func (c *ctl) providers() *cobra.Command {
	return &cobra.Command{Use: "providers [model]", Aliases: []string{"provider"},
		Short: "Lists the providers of the models served by several, live: state, recent time to first byte, rest and why, failures, this minute's requests and tokens, headroom",
		Long: "Lists the providers of the models served by several as this node's router sees them: each one's state " +
			"(ready, slow, over_limits, full, resting), its recent time to first byte, how long it still rests and why " +
			"(429: its Retry-After; failures: errors in a row; limit_spent: its rate-limit headers), failures in a row, " +
			"this minute's requests and tokens against its rpm and tpm, and the share of its rate limits it said it had left. " +
			"Without a model: every model with providers the router has routed.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var list []llmapi.ProvidersModel
			if len(args) == 1 {
				var one llmapi.ProvidersModel
				if err := c.call("GET", "/llm/providers/models/"+url.PathEscape(args[0]), nil, &one); err != nil || c.json {
					return err
				}
				list = append(list, one)
			} else if err := c.call("GET", "/llm/providers/models", nil, &list); err != nil || c.json {
				return err
			}
			var rows [][]string
			for _, m := range list {
				for _, p := range m.Providers {
					rows = append(rows, providerRow(m.Name, p))
				}
			}
			c.table("MODEL\tPROVIDER\tSTATE\tTTFT\tRESTING UNTIL\tFAILS\tREQ/MIN\tTOKENS/MIN\tHEADROOM", rows)
			if len(list) == 0 {
				fmt.Fprintln(c.out, "no model with providers has been asked here yet; a model's provider blocks make one (see docs/routing.md), llmgw ctl providers <model> shows one before its first request")
			}
			return nil
		}}
}

// providerRow is one provider's line of the table.
func providerRow(model string, p llmapi.ProviderState) []string {
	ttft, resting, headroom := "-", "-", "-"
	if p.TTFTMS != nil {
		d := time.Duration(*p.TTFTMS * float64(time.Millisecond))
		ttft = d.Round(time.Millisecond).String()
		if d < time.Millisecond {
			ttft = d.Round(time.Microsecond).String()
		}
	}
	if !p.RestingUntil.IsZero() {
		resting = p.RestingUntil.Local().Format(time.TimeOnly) + " (in " + time.Until(p.RestingUntil).Round(time.Second).String() + ", " + p.RestReason + ")"
	}
	if p.Headroom != nil {
		headroom = strconv.FormatFloat(*p.Headroom*100, 'f', -1, 64) + "%"
	}
	return []string{model, p.Name, p.State, ttft, resting, strconv.Itoa(p.FailuresInARow),
		perMinute(p.MinuteRequests, p.RPM), perMinute(p.MinuteTokens, p.TPM), headroom}
}

// perMinute is this minute's count against its limit: 12/60, 12 without
// a limit, - when not counted.
func perMinute(n *int64, limit int) string {
	switch {
	case n == nil:
		return "-"
	case limit > 0:
		return fmt.Sprintf("%d/%d", *n, limit)
	}
	return strconv.FormatInt(*n, 10)
}
