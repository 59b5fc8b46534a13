package llmadmin

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func testOrgs() []*tenancy.Org {
	return []*tenancy.Org{{Name: "acme", Limits: &tenancy.Limits{Models: []string{"sim-*", "other"}}, Teams: []*tenancy.Team{
		{Name: "research", Projects: []*tenancy.Project{{Name: "alpha", Limits: &tenancy.Limits{Models: []string{"sim-*"}}}, {Name: "beta"}}},
		{Name: "sales", Projects: []*tenancy.Project{{Name: "gamma"}}},
	}}, {Name: "globex"}}
}

func TestScope(t *testing.T) {
	for _, tc := range []struct {
		name, level, path string
		holds, outside    [][2]string
		allowed, refused  []string
	}{
		{"org", "org", "acme",
			[][2]string{{"org", "acme"}, {"team", "acme/sales"}, {"project", "acme/research/beta"}},
			[][2]string{{"org", "globex"}, {"project", "globex/x/y"}, {"project", "acme"}, {"team", "acmex/sales"}},
			[]string{"sim-chat", "other"}, []string{"gpt"}},
		{"team", "team", "acme/research",
			[][2]string{{"team", "acme/research"}, {"project", "acme/research/alpha"}},
			[][2]string{{"org", "acme"}, {"team", "acme/sales"}, {"project", "acme/sales/gamma"}},
			[]string{"other"}, nil},
		{"project", "project", "acme/research/alpha",
			[][2]string{{"project", "acme/research/alpha"}},
			[][2]string{{"team", "acme/research"}, {"project", "acme/research/beta"}, {"project", "acme/research/alpha/x"}},
			[]string{"sim-chat"}, []string{"other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scope{level: tc.level, path: tc.path}
			s.parts = strings.Split(tc.path, "/")
			if !s.find(testOrgs()) {
				t.Fatalf("%s not found", s)
			}
			for _, n := range tc.holds {
				if !s.holds(n[0], n[1]) {
					t.Errorf("%s does not hold %s %s", s, n[0], n[1])
				}
			}
			for _, n := range tc.outside {
				if s.holds(n[0], n[1]) {
					t.Errorf("%s holds %s %s", s, n[0], n[1])
				}
			}
			for _, m := range tc.allowed {
				if !s.allows(m) {
					t.Errorf("%s: model %s refused", s, m)
				}
			}
			for _, m := range tc.refused {
				if s.allows(m) {
					t.Errorf("%s: model %s allowed", s, m)
				}
			}
		})
	}
	for _, tc := range []struct{ level, path string }{{"project", "acme/research"}, {"team", "acme/nope"}, {"tenant", "acme"}, {"org", ""}} {
		if _, err := newScope(tc.level, tc.path, nil); err == nil {
			t.Errorf("newScope(%s, %s): no error", tc.level, tc.path)
		}
	}
}
