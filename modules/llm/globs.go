package llm

import "github.com/llmgw/llmgw/modules/llm/tenancy"

// warnUnmatchedGlobs warns about each models limit of the config's
// tenancy that matches no model of the catalog (tenancy.UnmatchedGlobs).
func (a *App) warnUnmatchedGlobs(v *view) {
	var names []string
	for _, m := range v.models {
		names = append(append(names, m.Name), m.Aliases...)
	}
	tenancy.WarnUnmatchedGlobs(a.logger, a.Orgs, names)
}
