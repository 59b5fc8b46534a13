package llmctl

import (
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

// TestCommands: the commands the llmgw package registers, each with its
// subcommands, as llmgw help lists them.
func TestCommands(t *testing.T) {
	want := map[string][]string{
		"ctl":    {"audit", "cache", "cluster", "engines", "kb", "keys", "mcp", "model", "models", "nodes", "peers", "providers", "replicas", "requests", "tenants", "usage", "weights"},
		"mirror": {"add", "fetch", "list", "purge", "remove", "rollback", "show", "sync", "update", "updates", "verify"},
	}
	var names []string
	for _, c := range Commands() {
		names = append(names, c.Name)
		if c.Short == "" || c.CobraFunc == nil {
			t.Errorf("%s: no Short or CobraFunc", c.Name)
			continue
		}
		cmd := &cobra.Command{Use: c.Name}
		c.CobraFunc(cmd)
		var subs []string
		for _, s := range cmd.Commands() {
			subs = append(subs, s.Name())
		}
		if !slices.Equal(subs, want[c.Name]) {
			t.Errorf("%s: got subcommands %v, want %v", c.Name, subs, want[c.Name])
		}
	}
	if !slices.Equal(names, []string{"ctl", "mirror"}) {
		t.Errorf("got commands %v", names)
	}
}
