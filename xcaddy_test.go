package llmgw

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestXcaddyManifestMatchesGoMod keeps xcaddy.json's Caddy version the one
// this module builds and tests with.
func TestXcaddyManifestMatchesGoMod(t *testing.T) {
	raw, err := os.ReadFile("xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		CaddyVersion string `json:"caddy_version"`
		Plugins      []struct{ Module string }
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if want := "github.com/caddyserver/caddy/v2 " + m.CaddyVersion + "\n"; !strings.Contains(string(mod), want) {
		t.Errorf("go.mod does not require caddy %s, which xcaddy.json pins", m.CaddyVersion)
	}
	if len(m.Plugins) != 1 || m.Plugins[0].Module != "github.com/llmgw/llmgw" {
		t.Errorf("plugins: got %+v", m.Plugins)
	}
}
