package llm

import (
	"path"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

// warnUnmatchedGlobs warns, at load (and so in `llmgw validate`), about
// each models limit of the config's tenancy that matches no model of the
// catalog: a misspelt name leaves a tenant with no model at all.
func (a *App) warnUnmatchedGlobs(v *view) {
	var names []string
	for _, m := range v.models {
		names = append(names, m.Name)
		names = append(names, m.Aliases...)
	}
	check := func(where string, l *tenancy.Limits) {
		if l == nil {
			return
		}
		for _, g := range l.Models {
			if _, err := path.Match(g, ""); err != nil {
				a.logger.Warn("a models limit is not a valid glob; it matches nothing", zap.String("tenant", where), zap.String("glob", g), zap.Error(err))
				continue
			}
			if !tenancy.MatchAny([]string{g}, names) {
				a.logger.Warn("a models limit matches no model in the catalog; check its spelling", zap.String("tenant", where), zap.String("glob", g))
			}
		}
	}
	for _, o := range a.Orgs {
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
}
