package tenancy

import (
	"path"

	"go.uber.org/zap"
)

// WarnUnmatchedGlobs logs, at load (and so in llmgw validate), each
// models limit of orgs that matches none of names (UnmatchedGlobs).
func WarnUnmatchedGlobs(logger *zap.Logger, orgs []*Org, names []string) {
	for _, w := range UnmatchedGlobs(orgs, names) {
		if w.Err != nil {
			logger.Warn("a models limit is not a valid glob; it matches nothing", zap.String("tenant", w.Tenant), zap.String("glob", w.Glob), zap.Error(w.Err))
		} else {
			logger.Warn("a models limit matches no model in the catalog; check its spelling", zap.String("tenant", w.Tenant), zap.String("glob", w.Glob))
		}
	}
}

// GlobWarning is a models limit of the tenancy tree that matches no
// model: Err is set when the glob is not valid.
type GlobWarning struct {
	Tenant string // the level: org, org/team, org/team/project, or "<project> key <id>"
	Glob   string
	Err    error
}

// UnmatchedGlobs are the models limits of orgs that match none of names
// (the catalog's names and aliases): a misspelt name leaves a tenant
// with no model at all.
func UnmatchedGlobs(orgs []*Org, names []string) []GlobWarning {
	var out []GlobWarning
	check := func(where string, l *Limits) {
		if l == nil {
			return
		}
		for _, g := range l.Models {
			if _, err := path.Match(g, ""); err != nil {
				out = append(out, GlobWarning{Tenant: where, Glob: g, Err: err})
			} else if !MatchAny([]string{g}, names) {
				out = append(out, GlobWarning{Tenant: where, Glob: g})
			}
		}
	}
	for _, o := range orgs {
		check(o.Name, o.Limits)
		for _, t := range o.Teams {
			check(o.Name+"/"+t.Name, t.Limits)
			for _, p := range t.Projects {
				pp := o.Name + "/" + t.Name + "/" + p.Name
				check(pp, p.Limits)
				for _, k := range p.Keys {
					check(pp+" key "+k.ID, k.Limits)
				}
			}
		}
	}
	return out
}
