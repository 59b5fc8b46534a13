package llmguard

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("llm_guardrails", parseCaddyfile)
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	g := new(Guardrails)
	err := g.UnmarshalCaddyfile(h.Dispenser)
	return g, err
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens:
//
//	llm_guardrails [<matcher>] {
//		output_block error|refusal
//		refusal      <text>
//		window       <bytes>
//		lookahead    <bytes>
//		pii     [<name>] { … }
//		regex   [<name>] { … }
//		judge   [<name>] { … }
//		webhook [<name>] { … }
//		check   <module> [<name>] { … }   # a check from a plugin
//	}
//
// Every check takes, besides its own settings:
//
//	on       input|output...
//	action   block|redact|log
//	models   <name|glob...>
//	tenants  <org[/team[/project]]|key:<id>...>
//	timeout  <duration>
//	on_error allow|deny
func (g *Guardrails) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		dir := d.Val()
		switch dir {
		case "output_block", "refusal", "window", "lookahead":
			if !d.NextArg() {
				return d.ArgErr()
			}
			v := d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
			switch dir {
			case "output_block":
				if v != "error" && v != "refusal" {
					return d.Errf("output_block %q: use error or refusal", v)
				}
				g.OutputBlock = v
			case "refusal":
				g.Refusal = v
			case "window":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return d.Errf("window %q is not a positive number of bytes", v)
				}
				g.Window = n
			case "lookahead":
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 {
					return d.Errf("lookahead %q is not a number of bytes", v)
				}
				g.Lookahead = n
			}
		default:
			mod := dir
			if dir == "check" {
				if !d.NextArg() {
					return d.Errf("check needs a module name, such as: check mycheck { … }")
				}
				mod = d.Val()
			}
			info, err := caddy.GetModule("http.llm_guardrails.checks." + mod)
			if err != nil {
				return d.Errf("unknown guardrail check %q; built in: pii, regex, judge, webhook (or check <module> for a plugin's)", mod)
			}
			c := info.New()
			u, ok := c.(caddyfile.Unmarshaler)
			if !ok {
				return d.Errf("check %s cannot be configured in a Caddyfile; use JSON", mod)
			}
			if err := u.UnmarshalCaddyfile(d.NewFromNextSegment()); err != nil {
				return err
			}
			g.ChecksRaw = append(g.ChecksRaw, caddyconfig.JSONModuleObject(c, "check", mod, nil))
		}
	}
	return nil
}

// parseCheck reads a check's block: an optional name after the directive,
// then subdirectives, each given to own first and to the common ones
// after.
func parseCheck(d *caddyfile.Dispenser, s *Scope, own func(dir string, args []string) (bool, error)) error {
	d.Next()
	if d.Val() == "check" {
		d.Next()
	}
	if d.NextArg() {
		s.Name = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		dir := d.Val()
		args := d.RemainingArgs()
		ok, err := own(dir, args)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		if err := s.parseCommon(d, dir, args); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scope) parseCommon(d *caddyfile.Dispenser, dir string, args []string) error {
	if len(args) == 0 {
		return d.ArgErr()
	}
	switch dir {
	case "on":
		for _, a := range args {
			if a != "input" && a != "output" {
				return d.Errf("on %q: use input and/or output", a)
			}
			s.On = append(s.On, Stage(a))
		}
	case "action":
		a, err := parseAction(args[0])
		if err != nil || len(args) > 1 {
			return d.Errf("action %q: use block, redact or log", strings.Join(args, " "))
		}
		s.Action = a
	case "models":
		s.Models = append(s.Models, args...)
	case "tenants":
		s.Tenants = append(s.Tenants, args...)
	case "timeout":
		dur, err := caddy.ParseDuration(args[0])
		if err != nil || dur <= 0 || len(args) > 1 {
			return d.Errf("timeout %q is not a positive duration such as 2s", args[0])
		}
		s.Timeout = caddy.Duration(dur)
	case "on_error":
		if len(args) != 1 || (args[0] != "allow" && args[0] != "deny") {
			return d.Errf("on_error %q: use allow or deny", strings.Join(args, " "))
		}
		s.OnError = args[0]
	default:
		return d.Errf("unknown subdirective %q", dir)
	}
	return nil
}

// pattern reads "<name> <regex> [action]".
func pattern(d *caddyfile.Dispenser, args []string) (Pattern, error) {
	if len(args) < 2 || len(args) > 3 {
		return Pattern{}, d.Errf("expected <name> <regex> [action], got %d arguments", len(args))
	}
	p := Pattern{Name: args[0], Regex: args[1]}
	if len(args) == 3 {
		a, err := parseAction(args[2])
		if err != nil {
			return Pattern{}, d.Err(err.Error())
		}
		p.Action = a
	}
	return p, nil
}

// UnmarshalCaddyfile reads:
//
//	pii [<name>] {
//		email|phone|card|iban|national_id|ip|secret [<action>]   # any listed: only those run
//		pattern <name> <regex> [<action>]
//		… common settings
//	}
func (p *PII) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseCheck(d, &p.Scope, func(dir string, args []string) (bool, error) {
		if detectors[dir] != nil {
			if len(args) > 1 {
				return true, d.ArgErr()
			}
			var a Action
			if len(args) == 1 {
				var err error
				if a, err = parseAction(args[0]); err != nil {
					return true, d.Err(err.Error())
				}
			}
			if p.Detectors == nil {
				p.Detectors = map[string]Action{}
			}
			p.Detectors[dir] = a
			return true, nil
		}
		if dir == "pattern" {
			pt, err := pattern(d, args)
			p.Patterns = append(p.Patterns, pt)
			return true, err
		}
		return false, nil
	})
}

// UnmarshalCaddyfile reads:
//
//	regex [<name>] {
//		deny  <name> <regex> [<action>]
//		allow <name> <regex>
//		… common settings
//	}
func (c *Regex) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseCheck(d, &c.Scope, func(dir string, args []string) (bool, error) {
		switch dir {
		case "deny":
			pt, err := pattern(d, args)
			c.Deny = append(c.Deny, pt)
			return true, err
		case "allow":
			pt, err := pattern(d, args)
			c.Allow = append(c.Allow, pt)
			return true, err
		}
		return false, nil
	})
}

// UnmarshalCaddyfile reads:
//
//	judge [<name>] {
//		model      <catalog model, or the endpoint's model>
//		endpoint   <base URL, up to /v1>
//		api_key    <key>
//		categories <category...>
//		system     <instruction>
//		… common settings
//	}
func (j *Judge) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseCheck(d, &j.Scope, func(dir string, args []string) (bool, error) {
		switch dir {
		case "categories":
			if len(args) == 0 {
				return true, d.ArgErr()
			}
			j.Categories = append(j.Categories, args...)
			return true, nil
		case "model", "endpoint", "api_key", "system":
			if len(args) != 1 {
				return true, d.ArgErr()
			}
			switch dir {
			case "model":
				j.Model = args[0]
			case "endpoint":
				j.Endpoint = args[0]
			case "api_key":
				j.APIKey = args[0]
			case "system":
				j.System = args[0]
			}
			return true, nil
		}
		return false, nil
	})
}

// UnmarshalCaddyfile reads:
//
//	webhook [<name>] {
//		url             <analyzer base URL>
//		anonymizer_url  <anonymizer base URL>
//		language        <code>
//		entities        <ENTITY...>
//		score_threshold <0..1>
//		header          <name> <value>
//		… common settings
//	}
func (wh *Webhook) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return parseCheck(d, &wh.Scope, func(dir string, args []string) (bool, error) {
		switch dir {
		case "entities":
			if len(args) == 0 {
				return true, d.ArgErr()
			}
			wh.Entities = append(wh.Entities, args...)
			return true, nil
		case "header":
			if len(args) != 2 {
				return true, d.ArgErr()
			}
			if wh.Headers == nil {
				wh.Headers = map[string]string{}
			}
			wh.Headers[args[0]] = args[1]
			return true, nil
		case "url", "anonymizer_url", "language", "score_threshold":
			if len(args) != 1 {
				return true, d.ArgErr()
			}
			switch dir {
			case "url":
				wh.URL = args[0]
			case "anonymizer_url":
				wh.AnonymizerURL = args[0]
			case "language":
				wh.Language = args[0]
			case "score_threshold":
				f, err := strconv.ParseFloat(args[0], 64)
				if err != nil || f < 0 || f > 1 {
					return true, d.Errf("score_threshold %q must be a number from 0 to 1", args[0])
				}
				wh.ScoreThreshold = f
			}
			return true, nil
		}
		return false, nil
	})
}

// Interface guards.
var (
	_ caddyfile.Unmarshaler = (*Guardrails)(nil)
	_ caddyfile.Unmarshaler = (*PII)(nil)
	_ caddyfile.Unmarshaler = (*Regex)(nil)
	_ caddyfile.Unmarshaler = (*Judge)(nil)
	_ caddyfile.Unmarshaler = (*Webhook)(nil)
)
