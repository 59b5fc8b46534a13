package audit

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Config bounds the audit log: every change made through the admin
// API (who, what, when, on which node), kept in Caddy storage under
// llm/audit/ in daily segments and, in a cluster, in a Redis stream that
// every node writes to. GET /llm/audit and llmgw ctl audit read it back.
type Config struct {
	// Keep is how long entries are kept in Caddy storage. Default: 30d.
	Keep caddy.Duration `json:"keep,omitempty"`
	// MaxEntries bounds the entries kept in Caddy storage and in the
	// cluster's stream (approximately there). Default: 100000.
	MaxEntries int `json:"max_entries,omitempty"`
}

func (c *Config) keep() time.Duration {
	if c == nil || c.Keep <= 0 {
		return 30 * 24 * time.Hour
	}
	return time.Duration(c.Keep)
}

func (c *Config) maxEntries() int {
	if c == nil || c.MaxEntries <= 0 {
		return 100000
	}
	return c.MaxEntries
}

// segmentLines is how many entries a segment holds: maxSegmentLines, or a
// quarter of max_entries when that is less. A segment also ends with its
// day, so segments can be short; see prune for what that bounds.
func (c *Config) segmentLines() int {
	return max(1, min(maxSegmentLines, c.maxEntries()/4))
}

// Parse reads
//
//	audit {
//		keep        <duration>  # default 30d
//		max_entries <n>         # default 100000
//	}
func (c *Config) Parse(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "keep":
			return caddyfileutil.DurationArg(d, &c.Keep)
		case "max_entries":
			return caddyfileutil.IntArg(d, &c.MaxEntries, 1)
		}
		return d.Errf("unrecognized audit subdirective %q; use keep or max_entries", dir)
	})
}
