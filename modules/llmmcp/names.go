package llmmcp

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// defaultSeparator joins a server's and a tool's name: "github__search"
// is a valid function name for OpenAI (^[a-zA-Z0-9_-]{1,64}$) and
// Anthropic alike, where "github.search" is not.
const defaultSeparator = "__"

// legacySeparator is the separator of earlier llmgw, which tenancy tools
// globs were written with ("github.*"): they keep matching.
const legacySeparator = "."

func checkSeparator(sep string) error {
	if len(sep) > 4 || strings.IndexFunc(sep, func(r rune) bool { return !nameRune(r) && r != '.' }) >= 0 {
		return fmt.Errorf("separator %q: use 1 to 4 letters, digits, '-', '_' or '.', such as __", clip(sep))
	}
	return nil
}

// perm is what a tenancy's tools globs are matched against: a server's
// tool (or prompt, or resource by its name), as the pair of names.
type perm struct {
	server, name string
}

// names are the ways a glob may name it: with the gateway's separator
// and with the legacy one.
func (p perm) names(sep string) []string {
	switch {
	case p.server == "":
		return []string{p.name}
	case sep == legacySeparator:
		return []string{p.server + sep + p.name}
	}
	return []string{p.server + sep + p.name, p.server + legacySeparator + p.name}
}

// allowed says whether a tenant may list and use what p names: at every
// level of its tenancy that limits tools, a glob matches one of its
// names (see llm.Tenant.ToolAllowed).
func allowed(t *tenancy.Tenant, p perm, sep string) bool {
	if t == nil {
		return true
	}
	names := p.names(sep)
	for _, l := range t.Levels {
		if len(l.Limits.Tools) > 0 && !tenancy.MatchAny(l.Limits.Tools, names) {
			return false
		}
	}
	return true
}

// permOf is the pair a client-facing name stands for: known from the
// routes, else split at the separator (a name the gateway does not offer,
// such as a tool of a server waiting for authorisation).
func (g *gateway) permOf(name string, routes map[string]route) perm {
	if r, ok := routes[name]; ok {
		return r.perm
	}
	if server, rest, ok := strings.Cut(name, g.sep); ok {
		return perm{server, rest}
	}
	if server, rest, ok := strings.Cut(name, legacySeparator); ok {
		return perm{server, rest}
	}
	return perm{name: name}
}

// full is the client-facing name of a server's tool or prompt.
func (g *gateway) full(server, name string) string { return server + g.sep + name }

// warnToolGlobs warns, at load (and so in `llmgw validate`), about each
// tools limit of the tenancy whose server part matches none of the
// configured servers: a misspelt server leaves a tenant without its tools.
// A glob without a separator (such as "*search*") is not checked.
func warnToolGlobs(logger *zap.Logger, app *llm.App, servers []*ServerConfig, sep string) {
	if app == nil {
		return
	}
	check := func(where string, l *tenancy.Limits) {
		if l == nil {
			return
		}
		for _, g := range l.Tools {
			server, _, ok := strings.Cut(g, sep)
			if !ok {
				if server, _, ok = strings.Cut(g, legacySeparator); !ok {
					continue
				}
			}
			if !slices.ContainsFunc(servers, func(s *ServerConfig) bool { m, _ := path.Match(server, s.Name); return m }) {
				logger.Warn("a tools limit names no MCP server of this llm_mcp handler; check its spelling", zap.String("tenant", where), zap.String("glob", g))
			}
		}
	}
	for _, o := range app.Tenancy() {
		check(o.Name, o.Limits)
		for _, t := range o.Teams {
			check(o.Name+"/"+t.Name, t.Limits)
			for _, p := range t.Projects {
				check(o.Name+"/"+t.Name+"/"+p.Name, p.Limits)
				for _, k := range p.Keys {
					check(o.Name+"/"+t.Name+"/"+p.Name+" key "+k.ID, k.Limits)
				}
			}
		}
	}
}
