package llmctl

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runEnv runs "llmgw ctl args…" with the environment given and no
// --admin of the test's own.
func runEnv(t *testing.T, env map[string]string, args ...string) (string, error) {
	t.Helper()
	for _, k := range []string{"LLMGW_ADMIN_TOKEN", "LLMGW_ADMIN_URL", "LLMGW_ADMIN"} {
		t.Setenv(k, env[k])
	}
	t.Setenv("XDG_CONFIG_HOME", env["XDG_CONFIG_HOME"])
	var out bytes.Buffer
	c := &ctl{out: &out, errOut: io.Discard}
	root := &cobra.Command{Use: "ctl", SilenceUsage: true, SilenceErrors: true}
	c.register(root)
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err := root.Execute()
	return out.String(), err
}

// TestAdminAddressOrder checks each step of where ctl finds the admin
// endpoint: every step's own endpoint answers, and the steps before it
// are absent; the one a step wins over is present and must not be asked.
func TestAdminAddressOrder(t *testing.T) {
	hit := func(name string) *admin {
		return newAdmin(t, map[string]answer{"GET /llm/models": {body: []map[string]any{{"name": name, "state": "ready"}}}})
	}
	flag, siteEnv, adminEnv, conf, saved := hit("from-flag"), hit("from-site-env"), hit("from-admin-env"), hit("from-config"), hit("from-autosave")
	host := func(a *admin) string { return strings.TrimPrefix(a.URL, "http://") }
	dir := t.TempDir()
	config := filepath.Join(dir, "caddy.json")
	write(t, config, fmt.Sprintf(`{"admin":{"listen":%q}}`, host(conf)))
	xdg := filepath.Join(dir, "xdg")
	write(t, filepath.Join(xdg, "caddy", "autosave.json"), fmt.Sprintf(`{"admin":{"listen":%q},"apps":{}}`, host(saved)))
	all := map[string]string{"LLMGW_ADMIN_URL": siteEnv.URL, "LLMGW_ADMIN": adminEnv.URL, "XDG_CONFIG_HOME": xdg}
	without := func(keys ...string) map[string]string {
		m := map[string]string{}
		for k, v := range all {
			m[k] = v
		}
		for _, k := range keys {
			delete(m, k)
		}
		return m
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"--admin first", all, []string{"--admin", flag.URL, "--config", config}, "from-flag"},
		{"then $LLMGW_ADMIN_URL", all, []string{"--config", config}, "from-site-env"},
		{"then $LLMGW_ADMIN", without("LLMGW_ADMIN_URL"), []string{"--config", config}, "from-admin-env"},
		{"then --config", without("LLMGW_ADMIN_URL", "LLMGW_ADMIN"), []string{"--config", config}, "from-config"},
		{"then the autosaved config", without("LLMGW_ADMIN_URL", "LLMGW_ADMIN"), nil, "from-autosave"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runEnv(t, tc.env, append(tc.args, "models")...)
			if err != nil || !strings.Contains(out, tc.want) {
				t.Errorf("got %q, %v; want the models of %s", out, err, tc.want)
			}
		})
	}
}

// TestAdminAddressDefault: with nothing set and no autosaved config, ctl
// asks localhost:2019 and says so when it cannot reach it.
func TestAdminAddressDefault(t *testing.T) {
	c := &ctl{}
	t.Setenv("LLMGW_ADMIN_URL", "")
	t.Setenv("LLMGW_ADMIN", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	target, where, _, err := c.endpoint("/llm/models")
	if err != nil || target != "http://localhost:2019/llm/models" || !strings.Contains(where, "(from the default)") {
		t.Errorf("got %s, %s, %v; want localhost:2019 from the default", target, where, err)
	}
	write(t, filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "caddy", "autosave.json"), `{"admin":`)
	_, err = runEnv(t, map[string]string{"XDG_CONFIG_HOME": os.Getenv("XDG_CONFIG_HOME")}, "models")
	if err == nil || !strings.Contains(err.Error(), "autosave.json for its admin address") || !strings.HasSuffix(err.Error(), "give --admin") {
		t.Errorf("a broken autosave.json: got %v", err)
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
