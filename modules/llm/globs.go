package llm

import (
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

// warnUnmatchedGlobs warns, at load (and so in `llmgw validate`), about
// each models limit of the config's tenancy that matches no model of the
// catalog (tenancy.UnmatchedGlobs).
func (a *App) warnUnmatchedGlobs(v *view) {
	var names []string
	for _, m := range v.models {
		names = append(append(names, m.Name), m.Aliases...)
	}
	for _, w := range tenancy.UnmatchedGlobs(a.Orgs, names) {
		if w.Err != nil {
			a.logger.Warn("a models limit is not a valid glob; it matches nothing", zap.String("tenant", w.Tenant), zap.String("glob", w.Glob), zap.Error(w.Err))
		} else {
			a.logger.Warn("a models limit matches no model in the catalog; check its spelling", zap.String("tenant", w.Tenant), zap.String("glob", w.Glob))
		}
	}
}
