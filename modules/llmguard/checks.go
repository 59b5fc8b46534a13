package llmguard

import (
	"context"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
)

func init() {
	caddy.RegisterModule(PII{})
	caddy.RegisterModule(Regex{})
}

// PII finds personal data and secrets: emails, phone numbers, payment
// cards (Luhn-checked), IBANs (mod-97-checked), national ids that carry a
// check (Spanish DNI/NIE, Swedish personnummer) and US SSNs, IPv4/IPv6
// addresses, secrets (cloud and SaaS keys, tokens, JWTs, private key
// blocks, high-entropy bearer tokens) and custom named patterns. Each
// detector can have its own action; redacted input values become typed
// placeholders (<EMAIL_1>) that the answer gets back as the originals.
type PII struct {
	Scope
	// Detectors to run, each with an action (or "" for the check's).
	// Names: email, phone, card, iban, national_id, ip, secret. Default:
	// all of them with the check's action.
	Detectors map[string]Action `json:"detectors,omitempty"`
	// Patterns are extra detectors: a name (its placeholder kind) and a
	// regular expression.
	Patterns []Pattern `json:"patterns,omitempty"`

	run []piiDetector
}

// Pattern is a named regular expression.
type Pattern struct {
	Name   string `json:"name"`
	Regex  string `json:"regex"`
	Action Action `json:"action,omitempty"`

	re  *regexp.Regexp
	pre prefilter
}

// prefilter is a literal every match contains: texts without it skip the
// regular expression, which would otherwise try every position.
type prefilter struct {
	lit  string
	fold bool // compare lower-cased
}

// requiredLiteral finds the longest literal (three bytes or more) in a
// regular expression's top-level sequence.
func requiredLiteral(expr string) prefilter {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return prefilter{}
	}
	re = re.Simplify()
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	var best prefilter
	for _, sub := range subs {
		if sub.Op != syntax.OpLiteral {
			continue
		}
		lit := string(sub.Rune)
		fold := sub.Flags&syntax.FoldCase != 0
		if fold {
			if !isASCII(lit) {
				continue
			}
			lit = strings.ToLower(lit)
		}
		if len(lit) >= 3 && len(lit) > len(best.lit) {
			best = prefilter{lit, fold}
		}
	}
	return best
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// mayMatch reports whether text may hold the literal. A literal of a
// case-insensitive expression is matched in ASCII text without regard to
// case, without a lower-cased copy; text with other bytes is left to the
// expression, as Unicode folds some letters outside ASCII onto ASCII ones
// ("ſ" onto "s", the Kelvin sign onto "k") that lower-casing does not.
func (p prefilter) mayMatch(text string) bool {
	switch {
	case p.lit == "":
		return true
	case !p.fold:
		return strings.Contains(text, p.lit)
	}
	first := p.lit[0] // lower case, like all of lit
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c >= utf8.RuneSelf {
			return true
		}
		if c|0x20 == first && i+len(p.lit) <= len(text) && equalFoldASCII(text[i:i+len(p.lit)], p.lit) {
			return true
		}
	}
	return false
}

// equalFoldASCII reports whether s equals lower, a lower-case ASCII
// string of its length, without regard to ASCII case.
func equalFoldASCII(s, lower string) bool {
	for i := 0; i < len(lower); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

type piiDetector struct {
	detect func(string, []detection) []detection
	re     *regexp.Regexp
	pre    prefilter
	kind   string
	action Action
}

// CaddyModule returns the Caddy module information.
func (PII) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.llm_guardrails.checks.pii", New: func() caddy.Module { return new(PII) }}
}

// Provision checks the configuration.
func (p *PII) Provision(caddy.Context) error {
	if err := p.defaults("pii", []Stage{Input, Output}, Redact); err != nil {
		return err
	}
	p.run = p.run[:0]
	if len(p.Detectors) == 0 {
		for _, name := range detectorOrder {
			p.run = append(p.run, piiDetector{detect: detectors[name], action: p.Action})
		}
	} else {
		for name := range p.Detectors {
			if detectors[name] == nil {
				return fmt.Errorf("check %s: no detector %q; known: %s", p.Name, name, strings.Join(detectorOrder, ", "))
			}
		}
		for _, name := range detectorOrder {
			a, ok := p.Detectors[name]
			if !ok {
				continue
			}
			if a == "" {
				a = p.Action
			}
			if _, err := parseAction(string(a)); err != nil {
				return fmt.Errorf("check %s: detector %s: %w", p.Name, name, err)
			}
			p.run = append(p.run, piiDetector{detect: detectors[name], action: a})
		}
	}
	for i := range p.Patterns {
		pt := &p.Patterns[i]
		if !validKind(pt.Name) {
			return fmt.Errorf("check %s: pattern name %q: use letters, digits and underscores", p.Name, pt.Name)
		}
		re, err := regexp.Compile(pt.Regex)
		if err != nil {
			return fmt.Errorf("check %s: pattern %s: %w", p.Name, pt.Name, err)
		}
		a := pt.Action
		if a == "" {
			a = p.Action
		}
		if _, err := parseAction(string(a)); err != nil {
			return fmt.Errorf("check %s: pattern %s: %w", p.Name, pt.Name, err)
		}
		pt.re = re
		p.run = append(p.run, piiDetector{re: re, pre: requiredLiteral(pt.Regex), kind: strings.ToUpper(pt.Name), action: a})
	}
	return nil
}

func validKind(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

// Incremental: PII detectors look at bounded spans.
func (*PII) Incremental() bool { return true }

// Inspect runs the detectors over every text.
func (p *PII) Inspect(_ context.Context, in *Inspection) ([]Finding, error) {
	var out []Finding
	var ds []detection
	for ti, text := range in.Texts {
		for _, d := range p.run {
			mark := len(ds)
			if d.re != nil {
				if !d.pre.mayMatch(text) {
					continue
				}
				for _, m := range d.re.FindAllStringIndex(text, -1) {
					if m[1] > m[0] {
						ds = append(ds, detection{m[0], m[1], d.kind})
					}
				}
			} else {
				ds = d.detect(text, ds)
			}
			for _, x := range ds[mark:] {
				out = append(out, Finding{Text: ti, Start: x.Start, End: x.End, Kind: x.Kind, Action: d.action})
			}
		}
		ds = ds[:0]
	}
	return out, nil
}

// Regex blocks (or redacts, or logs) text that matches named deny
// patterns, except where an allow pattern matches the same text.
type Regex struct {
	Scope
	Deny  []Pattern `json:"deny,omitempty"`
	Allow []Pattern `json:"allow,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Regex) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.llm_guardrails.checks.regex", New: func() caddy.Module { return new(Regex) }}
}

// Provision compiles the patterns.
func (c *Regex) Provision(caddy.Context) error {
	if err := c.defaults("regex", []Stage{Input, Output}, Block); err != nil {
		return err
	}
	if len(c.Deny) == 0 {
		return fmt.Errorf("check %s: no deny patterns; add at least one (deny <name> <regex>)", c.Name)
	}
	for _, list := range [][]Pattern{c.Deny, c.Allow} {
		for i := range list {
			pt := &list[i]
			if !validKind(pt.Name) {
				return fmt.Errorf("check %s: pattern name %q: use letters, digits and underscores", c.Name, pt.Name)
			}
			re, err := regexp.Compile(pt.Regex)
			if err != nil {
				return fmt.Errorf("check %s: pattern %s: %w", c.Name, pt.Name, err)
			}
			pt.re = re
			pt.pre = requiredLiteral(pt.Regex)
			if pt.Action == "" {
				pt.Action = c.Action
			}
			if _, err := parseAction(string(pt.Action)); err != nil {
				return fmt.Errorf("check %s: pattern %s: %w", c.Name, pt.Name, err)
			}
		}
	}
	return nil
}

// Incremental: regular expressions run on a window of the stream.
func (*Regex) Incremental() bool { return true }

// Inspect finds deny matches not covered by an allow match.
func (c *Regex) Inspect(_ context.Context, in *Inspection) ([]Finding, error) {
	var out []Finding
	for ti, text := range in.Texts {
		var allowed [][]int
		for _, d := range c.Deny {
			if !d.pre.mayMatch(text) {
				continue
			}
			if allowed == nil {
				allowed = [][]int{}
				for _, a := range c.Allow {
					if a.pre.mayMatch(text) {
						allowed = append(allowed, a.re.FindAllStringIndex(text, -1)...)
					}
				}
			}
			for _, m := range d.re.FindAllStringIndex(text, -1) {
				if m[1] == m[0] || slices.ContainsFunc(allowed, func(a []int) bool { return a[0] <= m[0] && a[1] >= m[1] }) {
					continue
				}
				out = append(out, Finding{Text: ti, Start: m[0], End: m[1], Kind: strings.ToUpper(d.Name), Action: d.Action})
			}
		}
	}
	return out, nil
}

// resolve orders one text's findings and drops those that overlap an
// earlier (or, at the same start, longer) one, so that each byte is
// replaced at most once.
func resolve(fs []Finding) []Finding {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].Text != fs[j].Text {
			return fs[i].Text < fs[j].Text
		}
		if fs[i].Start != fs[j].Start {
			return fs[i].Start < fs[j].Start
		}
		return fs[i].End > fs[j].End
	})
	out := fs[:0]
	lastText, lastEnd := -2, 0
	for _, f := range fs {
		if f.Text == lastText && f.Start < lastEnd {
			continue
		}
		out = append(out, f)
		lastText, lastEnd = f.Text, f.End
	}
	return out
}

var (
	_ Check       = (*PII)(nil)
	_ Check       = (*Regex)(nil)
	_ Incremental = (*PII)(nil)
	_ Incremental = (*Regex)(nil)
)
