package tenancy

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeyringInheritance(t *testing.T) {
	kr, err := NewKeyring([]*Org{{Name: "acme", Limits: &Limits{RequestsPerMinute: 100, Budget: 50, Models: []string{"gpt-*", "sim-*"}},
		Teams: []*Team{{Name: "research", Limits: &Limits{RequestsPerMinute: 10, TokensPerMinute: 5000},
			Projects: []*Project{{Name: "alpha", Limits: &Limits{RequestsPerMinute: 20, Models: []string{"sim-*"}},
				Keys: []*APIKey{{ID: "k1", SHA256: HashKey("s1"), Limits: &Limits{MaxConcurrent: 2}}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	tn := kr.byHash[HashKey("s1")]
	if tn == nil {
		t.Fatal("key not found by its hash")
	}
	want := Limits{RequestsPerMinute: 10, TokensPerMinute: 5000, Budget: 50, BudgetPeriod: "month", MaxConcurrent: 2, Models: []string{"sim-*"}}
	if diff := cmp.Diff(want, tn.Effective); diff != "" {
		t.Errorf("effective limits (-want +got):\n%s", diff)
	}
	if got := []string{tn.Levels[0].Node(), tn.Levels[1].Node(), tn.Levels[2].Node(), tn.Levels[3].Node()}; strings.Join(got, ",") != "k:k1,p:acme/research/alpha,t:acme/research,o:acme" {
		t.Errorf("levels: %v", got)
	}
	for _, tc := range []struct {
		names []string
		want  bool
	}{
		{[]string{"sim-chat"}, true},
		{[]string{"gpt-4o"}, false}, // the org allows it; the project does not
		{[]string{"alias", "sim-chat"}, true},
		{[]string{"llama"}, false},
	} {
		if got := tn.Allowed(tc.names...); got != tc.want {
			t.Errorf("Allowed(%v): got %v, want %v", tc.names, got, tc.want)
		}
	}
}

func TestKeyringErrors(t *testing.T) {
	key := func(id, hash string) []*Org {
		return []*Org{{Name: "o", Teams: []*Team{{Name: "t", Projects: []*Project{{Name: "p", Keys: []*APIKey{{ID: id, SHA256: hash}}}}}}}}
	}
	for _, tc := range []struct {
		name string
		orgs []*Org
		want string
	}{
		{"bad hash", key("k", "abc"), "64 hex digits"},
		{"empty id", key("", HashKey("x")), "key id"},
		{"slash in org", []*Org{{Name: "a/b"}}, "has '/'"},
		{"long team", []*Org{{Name: "a", Teams: []*Team{{Name: strings.Repeat("t", 129)}}}}, "is 129 bytes long"},
		{"escape in key id", key("k\x1b[2J", HashKey("x")), `key id "k\x1b[2J" has the control or unprintable character U+001B`},
		{"same hash", append(key("k", HashKey("x")), &Org{Name: "o2", Teams: []*Team{{Name: "t", Projects: []*Project{{Name: "p",
			Keys: []*APIKey{{ID: "k2", SHA256: strings.ToUpper(HashKey("x"))}}}}}}}),
			`keys "k" (project o/t/p) and "k2" (project o2/t/p) have the same sha256`},
		{"duplicate org", []*Org{{Name: "a"}, {Name: "a"}}, "declared twice"},
		{"duplicate key", append(key("k", HashKey("x")), &Org{Name: "o2", Teams: []*Team{{Name: "t", Projects: []*Project{{Name: "p",
			Keys: []*APIKey{{ID: "k", SHA256: HashKey("y")}}}}}}}), `"k" is used twice`},
		{"negative limit", []*Org{{Name: "o", Limits: &Limits{RequestsPerMinute: -1}, Teams: []*Team{{Name: "t", Projects: []*Project{{Name: "p",
			Keys: []*APIKey{{ID: "k", SHA256: HashKey("y")}}}}}}}}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewKeyring(tc.orgs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
