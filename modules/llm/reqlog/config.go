package reqlog

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Defaults of the retention.
const (
	DefaultMaxAge     = 7 * 24 * time.Hour
	DefaultMaxRecords = 1_000_000
	DefaultBodyMaxAge = 24 * time.Hour
)

// Config is the llm app's request_log: on unless Off, bounded by age and
// count, with bodies kept only for the tenants Bodies names.
type Config struct {
	// Off turns the request log off.
	Off bool `json:"off,omitempty"`
	// MaxAge drops records older than it. Default: 7 days.
	MaxAge caddy.Duration `json:"max_age,omitempty"`
	// MaxRecords drops the oldest records beyond it (in a cluster, of
	// the cluster's one log). Default: 1,000,000.
	MaxRecords int `json:"max_records,omitempty"`
	// Bodies are the tenants (org, org/team or org/team/project) whose
	// requests are kept with their bodies: the request as forwarded to
	// the model (after the guardrails' redaction) and the answer as the
	// model gave it, each up to 64 KiB. Default: none.
	Bodies []string `json:"bodies,omitempty"`
	// BodyMaxAge drops kept bodies older than it (the records stay).
	// Default: 24h.
	BodyMaxAge caddy.Duration `json:"body_max_age,omitempty"`
}

// Retention is the config's retention with its defaults.
func (c *Config) Retention() Retention {
	r := Retention{MaxAge: DefaultMaxAge, MaxRecords: DefaultMaxRecords, BodyMaxAge: DefaultBodyMaxAge}
	if c == nil {
		return r
	}
	if c.MaxAge > 0 {
		r.MaxAge = time.Duration(c.MaxAge)
	}
	if c.MaxRecords > 0 {
		r.MaxRecords = c.MaxRecords
	}
	if c.BodyMaxAge > 0 {
		r.BodyMaxAge = time.Duration(c.BodyMaxAge)
	}
	return r
}

// Validate checks the config.
func (c *Config) Validate() error {
	if c == nil {
		return nil
	}
	if c.MaxAge < 0 || c.BodyMaxAge < 0 || c.MaxRecords < 0 {
		return fmt.Errorf("request_log: max_age, body_max_age and max_records must not be negative")
	}
	for _, t := range c.Bodies {
		if t == "" || strings.Count(t, "/") > 2 || strings.Contains(t, "//") || strings.HasPrefix(t, "/") || strings.HasSuffix(t, "/") {
			return fmt.Errorf("request_log: bodies %q: name a tenant as org, org/team or org/team/project", t)
		}
	}
	return nil
}

// KeepsBodies says whether the requests of tenant (org/team/project) are
// kept with their bodies.
func (c *Config) KeepsBodies(tenant string) bool {
	if c == nil || tenant == "" {
		return false
	}
	for _, t := range c.Bodies {
		if tenant == t || strings.HasPrefix(tenant, t+"/") {
			return true
		}
	}
	return false
}

// UnmarshalCaddyfile reads
//
//	request_log [off] {
//		max_age      <duration>
//		max_records  <n>
//		bodies       <tenant>...
//		body_max_age <duration>
//	}
func (c *Config) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		if d.Val() != "off" {
			return d.Errf("request_log %q: the only argument is off; the retention goes in its block", d.Val())
		}
		c.Off = true
	}
	if d.NextArg() {
		return d.Errf("request_log takes at most one argument (off)")
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("request_log %s needs a value", dir)
		}
		return c.set(d, dir, args)
	}, "bodies")
}

func (c *Config) set(d *caddyfile.Dispenser, dir string, args []string) error {
	switch dir {
	case "max_age", "body_max_age":
		v, err := caddy.ParseDuration(args[0])
		if err != nil || v <= 0 {
			return d.Errf("request_log %s %q: use a duration such as 72h", dir, args[0])
		}
		if dir == "max_age" {
			c.MaxAge = caddy.Duration(v)
		} else {
			c.BodyMaxAge = caddy.Duration(v)
		}
	case "max_records":
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return d.Errf("request_log max_records %q: use a positive number", args[0])
		}
		c.MaxRecords = n
	case "bodies":
		c.Bodies = append(c.Bodies, args...)
	default:
		return d.Errf("request_log: unknown subdirective %q; use max_age, max_records, bodies or body_max_age", dir)
	}
	return nil
}
