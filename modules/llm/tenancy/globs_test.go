package tenancy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestUnmatchedGlobs(t *testing.T) {
	orgs := []*Org{{Name: "acme", Limits: &Limits{Models: []string{"chat*"}}, Teams: []*Team{{Name: "t",
		Limits: &Limits{Models: []string{"chta"}}, Projects: []*Project{{Name: "p", Limits: &Limits{Models: []string{"[x"}},
			Keys: []*APIKey{{ID: "k", Limits: &Limits{Models: []string{"east/*", "west/*"}}}}}}}}}}
	got := UnmatchedGlobs(orgs, []string{"chat", "east/chat"})
	want := []GlobWarning{{Tenant: "acme/t", Glob: "chta"}, {Tenant: "acme/t/p", Glob: "[x", Err: cmpopts.AnyError}, {Tenant: "acme/t/p key k", Glob: "west/*"}}
	if d := cmp.Diff(want, got, cmpopts.EquateErrors()); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
}
