package llmmcp

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func TestCommandAllowed(t *testing.T) {
	globs := []string{"/usr/local/bin/mcp-*", "/opt/tools/server"}
	for _, tc := range []struct {
		name, cmd string
		want      bool
	}{
		{"glob", "/usr/local/bin/mcp-github", true},
		{"exact", "/opt/tools/server", true},
		{"shell", "/bin/sh", false},
		{"relative", "mcp-github", false},
		{"dot dot out of the glob", "/usr/local/bin/mcp-x/../../../../bin/sh", false},
		{"dot dot into the glob", "/usr/local/lib/../bin/mcp-github", true},
		{"no glob", "/usr/local/bin/mcp-github", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := commandAllowed(globs, tc.cmd); got != tc.want {
				t.Errorf("commandAllowed(%q) = %v, want %v", tc.cmd, got, tc.want)
			}
		})
	}
	if commandAllowed(nil, "/usr/local/bin/mcp-github") {
		t.Error("an empty allow_commands allowed a command")
	}
}

func TestCheckRuntimeEnv(t *testing.T) {
	for _, k := range []string{"LD_PRELOAD", "ld_library_path", "PATH", "DYLD_INSERT_LIBRARIES", "NODE_OPTIONS", "PYTHONPATH", "BASH_ENV", "BASH_FUNC_x%%", "A=B", "", "1X"} {
		if err := checkRuntimeEnv("s", map[string]string{k: "x"}); err == nil {
			t.Errorf("env %q was accepted", k)
		}
	}
	if err := checkRuntimeEnv("s", map[string]string{"GITHUB_TOKEN": "x", "LOG_LEVEL": "debug"}); err != nil {
		t.Errorf("ordinary env refused: %v", err)
	}
}

func TestAllowedLegacyGlobs(t *testing.T) {
	tenant := func(globs ...string) *tenancy.Tenant {
		return &tenancy.Tenant{KeyID: "k", Levels: []tenancy.Level{{Kind: "key", Name: "k", Limits: tenancy.Limits{Tools: globs}}}}
	}
	for _, tc := range []struct {
		name  string
		globs []string
		p     perm
		sep   string
		want  bool
	}{
		{"dotted glob, new separator", []string{"github.*"}, perm{"github", "search"}, "__", true},
		{"new glob", []string{"github__*"}, perm{"github", "search"}, "__", true},
		{"dotted exact", []string{"github.search"}, perm{"github", "search"}, "__", true},
		{"other server", []string{"github.*"}, perm{"gitlab", "search"}, "__", false},
		{"legacy separator", []string{"github.*"}, perm{"github", "search"}, ".", true},
		{"custom separator", []string{"github-*"}, perm{"github", "search"}, "-", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowed(tenant(tc.globs...), tc.p, tc.sep); got != tc.want {
				t.Errorf("allowed(%v, %+v, %q) = %v, want %v", tc.globs, tc.p, tc.sep, got, tc.want)
			}
		})
	}
}

// A url that passes no parse (a space in the host) once panicked OAuth
// discovery with a nil request.
func TestDiscoverBadURL(t *testing.T) {
	_, err := discoverClient(context.Background(), http.DefaultClient, "s", "http://a b/mcp", OAuthConfig{}, "")
	if err == nil || !strings.Contains(err.Error(), "fix the server's url") {
		t.Errorf("got %v, want an error saying the url is wrong", err)
	}
}
