package llm

import (
	"slices"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// ParseBlock reads a handler directive that takes no arguments and a block
// of subdirectives, calling fn with each subdirective's name (the
// dispenser on it). A subdirective given twice is an error, as an unknown
// one must be in fn. The llm_* handlers share it so their syntax behaves
// the same.
func ParseBlock(d *caddyfile.Dispenser, fn func(dir string) error) error {
	d.Next() // directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	return eachSubdirective(d, fn)
}

// eachSubdirective calls fn with the name of each subdirective of the block
// the dispenser is at (the dispenser on it). A subdirective given twice is
// an error unless repeatable names it.
func eachSubdirective(d *caddyfile.Dispenser, fn func(dir string) error, repeatable ...string) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		dir := d.Val()
		if !slices.Contains(repeatable, dir) {
			if seen[dir] {
				return d.Errf("duplicate subdirective %q", dir)
			}
			seen[dir] = true
		}
		if err := fn(dir); err != nil {
			return err
		}
	}
	return nil
}
