package llmrouter

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_router", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	rt := new(Router)
	err := rt.UnmarshalCaddyfile(h.Dispenser)
	return rt, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_router [<matcher>] {
//		policy                  least_outstanding|round_robin|prefix_affinity [{
//			block_bytes  <n>
//			cache_tokens <n>
//			balance_abs  <n>
//			balance_rel  <x>
//			header       <name>
//		}]
//		first_byte_timeout      <duration>
//		dial_timeout            <duration>
//		max_idle_conns_per_host <n>
//		max_n                   <n>
//		max_messages            <n>
//		expose_replica
//	}
func (rt *Router) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyfileutil.ParseBlock(d, func(dir string) error {
		switch dir {
		case "policy":
			return rt.parsePolicy(d)
		case "first_byte_timeout":
			return parseDuration(d, &rt.FirstByteTimeout)
		case "dial_timeout":
			return parseDuration(d, &rt.DialTimeout)
		case "max_idle_conns_per_host":
			return parseInt(d, &rt.MaxIdleConnsPerHost)
		case "max_n":
			return parseInt(d, &rt.MaxN)
		case "max_messages":
			return parseInt(d, &rt.MaxMessages)
		case "expose_replica":
			if d.NextArg() {
				return d.ArgErr()
			}
			rt.ExposeReplica = true
			return nil
		}
		return d.Errf("unrecognized llm_router subdirective %q", dir)
	})
}

func (rt *Router) parsePolicy(d *caddyfile.Dispenser) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	nesting := d.Nesting()
	switch name {
	case "least_outstanding", "round_robin":
		if d.NextBlock(nesting) {
			return d.Errf("policy %s takes no options", name)
		}
		rt.PolicyRaw = caddyconfig.JSONModuleObject(struct{}{}, "policy", name, nil)
		return nil
	case "prefix_affinity":
		p := new(PrefixAffinity)
		for d.NextBlock(nesting) {
			var err error
			switch d.Val() {
			case "block_bytes":
				err = parseInt(d, &p.BlockBytes)
			case "cache_tokens":
				err = parseInt(d, &p.CacheTokens)
			case "balance_abs":
				err = parseInt(d, &p.BalanceAbs)
			case "balance_rel":
				if !d.NextArg() {
					return d.ArgErr()
				}
				p.BalanceRel, err = strconv.ParseFloat(d.Val(), 64)
				if err != nil || p.BalanceRel <= 1 {
					return d.Errf("balance_rel %q: a number above 1, such as 1.5", d.Val())
				}
			case "header":
				if !d.Args(&p.Header) {
					return d.ArgErr()
				}
			default:
				return d.Errf("unrecognized prefix_affinity option %q; use block_bytes, cache_tokens, balance_abs, balance_rel or header", d.Val())
			}
			if err != nil {
				return err
			}
		}
		rt.PolicyRaw = caddyconfig.JSONModuleObject(p, "policy", name, nil)
		return nil
	}
	return d.Errf("unknown policy %q; use least_outstanding, round_robin or prefix_affinity", name)
}

func parseDuration(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	v, err := caddy.ParseDuration(d.Val())
	if err != nil || v <= 0 {
		return d.Errf("%q is not a positive duration such as 30s", d.Val())
	}
	*dst = caddy.Duration(time.Duration(v))
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

func parseInt(d *caddyfile.Dispenser, dst *int) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n < 1 {
		return d.Errf("%q is not a whole number of at least 1", d.Val())
	}
	*dst = n
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Router)(nil)
