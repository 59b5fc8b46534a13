package llm

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// parseOrg parses an organisation of the tenancy tree:
//
//	org <name> {
//		<limits>
//		capacity {
//			memory   <size>
//			cores    <n>
//			gpus     <n>
//			replicas <n>
//		}
//		team <name> {
//			<limits>
//			capacity { … }
//			project <name> {
//				<limits>
//				capacity { … }
//				key <id> <sha256> [{
//					<limits>
//				}]
//			}
//		}
//	}
//
// where <limits> are any of
//
//	requests_per_minute <n>
//	tokens_per_minute   <n>
//	tokens_per_day      <n>
//	budget              <amount> [day|month]
//	max_concurrent      <n>
//	max_output          <tokens>    # the most tokens one answer may have
//	models              <name|glob...>
//	tools               <server.tool|glob...>
//	tool_calls_per_minute <n>
//	tool_calls_per_day    <n>
//	kb_bytes            <size>      # knowledge bases' files (llm_kb)
//	kb_files            <n>
func (a *App) parseOrg(d *caddyfile.Dispenser) error {
	o := new(tenancy.Org)
	if err := caddyfileutil.NameArg(d, &o.Name); err != nil {
		return err
	}
	return tenancy.ParseNode(d, &o.Limits, func(dir string) (bool, error) {
		if dir == "capacity" {
			return true, tenancy.ParseCapacity(d, &o.Capacity)
		}
		if dir != "team" {
			return false, nil
		}
		t := new(tenancy.Team)
		o.Teams = append(o.Teams, t)
		return true, tenancy.ParseTeam(d, t)
	}, func() { a.Orgs = append(a.Orgs, o) })
}
