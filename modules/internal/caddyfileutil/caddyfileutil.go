// Package caddyfileutil holds the Caddyfile helpers the llm app and the llm_*
// handlers share, so their syntax behaves the same: a block of subdirectives
// where a repeated one is an error, and the argument readers that report
// the file and line of a mistake.
package caddyfileutil

import (
	"slices"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
)

// OneArg reads exactly one argument into dst.
func OneArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

// ManyArgs appends one or more arguments to dst.
func ManyArgs(d *caddyfile.Dispenser, dst *[]string) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	*dst = append(*dst, args...)
	return nil
}

// IntArg reads one integer argument of at least least into dst.
func IntArg(d *caddyfile.Dispenser, dst *int, least int) error {
	var s string
	if err := OneArg(d, &s); err != nil {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < least {
		return d.Errf("%s: %q is not a whole number of at least %d", d.Val(), s, least)
	}
	*dst = n
	return nil
}

// DurationArg reads one duration argument (Caddy's syntax, e.g. 30s or 1d) into dst.
func DurationArg(d *caddyfile.Dispenser, dst *caddy.Duration) error {
	var s string
	if err := OneArg(d, &s); err != nil {
		return err
	}
	dur, err := caddy.ParseDuration(s)
	if err != nil || dur < 0 {
		return d.Errf("%q is not a duration such as 30s or 5m", s)
	}
	*dst = caddy.Duration(time.Duration(dur))
	return nil
}

// NameArg reads exactly one name argument into dst.
func NameArg(d *caddyfile.Dispenser, dst *string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	*dst = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	return nil
}

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
	return EachSubdirective(d, fn)
}

// EachSubdirective calls fn with the name of each subdirective of the block
// the dispenser is at (the dispenser on it). A subdirective given twice is
// an error unless repeatable names it.
func EachSubdirective(d *caddyfile.Dispenser, fn func(dir string) error, repeatable ...string) error {
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

// SizeArg reads one size argument such as 8GiB into dst; a bad one is an
// error naming the subdirective name and an example size.
func SizeArg(d *caddyfile.Dispenser, dst *int64, name, example string) error {
	var s string
	if err := OneArg(d, &s); err != nil {
		return err
	}
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return d.Errf("%s %q is not a size such as %s", name, s, example)
	}
	*dst = int64(n)
	return nil
}
