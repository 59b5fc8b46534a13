package llmquota

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_quota", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	q := new(Quota)
	err := q.UnmarshalCaddyfile(h.Dispenser)
	return q, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_quota [<matcher>] {
//		store              memory|redis://host:port[/db]|redis://sentinel:26379?master_name=m&addr=sentinel2:26379
//		on_store_error     deny|allow
//		default_max_tokens <n>
//		lease              <duration>
//		rate_limit_headers refused|always
//	}
func (q *Quota) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyfileutil.ParseBlock(d, func(dir string) error {
		if !d.NextArg() {
			return d.ArgErr()
		}
		val := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		switch dir {
		case "store":
			q.Store = val
		case "on_store_error":
			if val != "deny" && val != "allow" {
				return d.Errf("on_store_error %q: use deny or allow", val)
			}
			q.OnStoreError = val
		case "default_max_tokens":
			n, err := strconv.ParseInt(val, 10, 64)
			if err != nil || n < 1 {
				return d.Errf("default_max_tokens %q is not a whole number of at least 1", val)
			}
			q.DefaultMaxTokens = n
		case "lease":
			dur, err := caddy.ParseDuration(val)
			if err != nil || dur <= 0 {
				return d.Errf("lease %q is not a positive duration such as 15m", val)
			}
			q.Lease = caddy.Duration(time.Duration(dur))
		case "rate_limit_headers":
			if val != "always" && val != "refused" {
				return d.Errf("rate_limit_headers %q: use always (every answer) or refused (429s only)", val)
			}
			q.RateLimitHeaders = val
		default:
			return d.Errf("unrecognized llm_quota subdirective %q", dir)
		}
		return nil
	})
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Quota)(nil)
