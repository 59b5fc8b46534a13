package tenancy

import (
	"strings"
	"testing"
)

// TestMergeTenancyDropsBadNames: a runtime level stored before the id
// rule, with a name that breaks it, is left out with the reason, so that
// it cannot stop the app from starting.
func TestMergeTenancyDropsBadNames(t *testing.T) {
	config := []*Org{{Name: "acme", Teams: []*Team{{Name: "research"}}}}
	entries := []*Entry{{Path: "ev\x1bil"}, {Path: "acme/research/" + strings.Repeat("p", 200)}, {Path: "acme/ok"}}
	tn, dropped := Merge(config, entries)
	if got := strings.Join(tn.Paths(), " "); got != "acme acme/research acme/ok" {
		t.Errorf("paths: got %q, want the config's and acme/ok", got)
	}
	if len(dropped) != 2 || !strings.Contains(dropped["ev\x1bil"], "U+001B") || !strings.Contains(dropped[entries[1].Path], "200 bytes") {
		t.Errorf("dropped: got %q, want both bad names with the rule they break", dropped)
	}
	if _, err := NewKeyring(tn.orgs); err != nil {
		t.Errorf("the keyring of the merged tree: %v", err)
	}
}
