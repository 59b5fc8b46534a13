package llmkb

import (
	"net/http"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// caller is who asks: the project of the request's key ("org/team/
// project"), "" on a route without llm_quota.
type caller struct {
	project string
	team    string
	org     string
	keyID   string
}

func callerOf(r *http.Request) caller {
	t, ok := tenancy.TenantOf(r)
	if !ok {
		return caller{}
	}
	return caller{project: t.Project, team: t.Team, org: t.Org, keyID: t.KeyID}
}

// ownerFor is the owner a new store gets when shared at level ("",
// "project", "team" or "org").
func (c caller) ownerFor(level string) string {
	switch level {
	case "team":
		return c.team
	case "org":
		return c.org
	}
	return c.project
}

// sees reports whether the caller may read a store: its own project's,
// or one shared down the tree from its team or organisation.
func (c caller) sees(vs *kbstore.VectorStore) bool {
	if vs.Owner == c.project {
		return true
	}
	return vs.Shared && vs.Owner != "" && strings.HasPrefix(c.project, vs.Owner+"/")
}

// changes reports whether the caller may change a store: the project
// that made it.
func (c caller) changes(vs *kbstore.VectorStore) bool {
	if vs.Creator != "" {
		return vs.Creator == c.project
	}
	return vs.Owner == c.project
}

// ownsFile reports whether the caller may read or use a file.
func (c caller) ownsFile(f *kbstore.File) bool { return f.Owner == c.project }
