package llmcache

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_cache", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Cache)
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return c, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_cache [<matcher>] {
//		ttl             <duration>
//		max_memory      <size>          # such as 256MiB
//		models          <name|glob...>
//		max_temperature <t>
//		scope           key|project|team|org|global
//		semantic        [<threshold>]
//		redis           redis://host:port[/db]
//		admission       frequency|all
//	}
func (c *Cache) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyfileutil.ParseBlock(d, func(dir string) error {
		return c.parseField(d, dir, d.RemainingArgs())
	})
}

func (c *Cache) parseField(d *caddyfile.Dispenser, dir string, args []string) error {
	one := func() (string, error) {
		if len(args) != 1 {
			return "", d.ArgErr()
		}
		return args[0], nil
	}
	switch dir {
	case "models":
		if len(args) == 0 {
			return d.ArgErr()
		}
		c.Models = args
		return nil
	case "semantic":
		c.Semantic = new(Semantic)
		if len(args) > 1 {
			return d.ArgErr()
		}
		if len(args) == 1 {
			t, err := strconv.ParseFloat(args[0], 64)
			if err != nil || t <= 0 || t > 1 {
				return d.Errf("semantic threshold %q must be a number in (0, 1]", args[0])
			}
			c.Semantic.Threshold = t
		}
		return c.parseSemanticBlock(d)
	}
	v, err := one()
	if err != nil {
		return err
	}
	switch dir {
	case "admission":
		if v != admitFrequency && v != admitAll {
			return d.Errf("admission %q: use frequency (keep a new answer in a full cache only when its question is asked more than the one it would evict) or all", v)
		}
		c.Admission = v
		return nil
	case "ttl":
		dur, err := caddy.ParseDuration(v)
		if err != nil || dur <= 0 {
			return d.Errf("ttl %q is not a positive duration such as 1h", v)
		}
		c.TTL = caddy.Duration(time.Duration(dur))
	case "max_memory":
		n, err := humanize.ParseBytes(v)
		if err != nil || n == 0 {
			return d.Errf("max_memory %q is not a size such as 256MiB", v)
		}
		c.MaxMemory = int64(n)
	case "max_temperature":
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || t < 0 {
			return d.Errf("max_temperature %q is not a number of at least 0", v)
		}
		c.MaxTemperature = &t
	case "redis":
		c.Redis = v
	case "scope":
		switch v {
		case "key", "project", "team", "org", "global":
		default:
			return d.Errf("scope %q: use key, project, team, org or global", v)
		}
		c.Scope = v
	default:
		return d.Errf("unrecognized llm_cache subdirective %q", dir)
	}
	return nil
}

// parseSemanticBlock reads semantic's optional block:
//
//	semantic [<threshold>] {
//		embedder      <catalog model> [<threshold>]
//		embed_timeout <duration>
//	}
//
// embedder's threshold is the least cosine of that model's vectors for a
// hit; without it, semantic's threshold applies.
func (c *Cache) parseSemanticBlock(d *caddyfile.Dispenser) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		var v string
		if !d.Args(&v) {
			return d.ArgErr()
		}
		if dir == "embedder" && d.NextArg() {
			t, err := strconv.ParseFloat(d.Val(), 64)
			if err != nil || t <= 0 || t > 1 {
				return d.Errf("embedder threshold %q must be a number in (0, 1]", d.Val())
			}
			c.Semantic.EmbedderThreshold = t
		}
		if d.NextArg() {
			return d.ArgErr()
		}
		switch dir {
		case "embedder":
			c.Semantic.Embedder = v
		case "embed_timeout":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("embed_timeout %q is not a positive duration", v)
			}
			c.Semantic.EmbedTimeout = caddy.Duration(time.Duration(dur))
		default:
			return d.Errf("unrecognized semantic subdirective %q", dir)
		}
	}
	return nil
}

// Interface guards
var _ caddyfile.Unmarshaler = (*Cache)(nil)
