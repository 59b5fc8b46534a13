package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// llm_router placed before llm_quota in a route would serve every request
// without a key, and llm_kb before llm_quota would serve files and vector
// stores without one; llm_kb after llm_router never runs: such configs
// are refused at start, saying what to change.
func TestRouterBeforeQuotaIsRefused(t *testing.T) {
	for _, tc := range []struct{ route, want string }{
		{"llm_router\n\t\tllm_quota", "llm_router comes before llm_quota"},
		{"llm_kb\n\t\tllm_quota\n\t\tllm_router", "llm_kb comes before llm_quota"},
		{"llm_quota\n\t\tllm_router\n\t\tllm_kb", "llm_kb comes after llm_router"},
	} {
		refusedOrder(t, tc.route, tc.want)
	}
}

// refusedOrder starts llmgw with a /v1/* route of the handlers given and
// wants it refused with want in its output.
func refusedOrder(t *testing.T, route, want string) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		model m {
			engine sim
			min 0
		}
		org acme {
			team t {
				project p {
					key k1 %s
				}
			}
		}
	}
}

:%d {
	route /v1/* {
		%s
	}
}
`, freePort(t), filepath.Join(dir, "storage"), tenancy.HashKey("secret-1"), freePort(t), route)
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(bg, 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "run", "--config", filepath.Join(dir, "Caddyfile"))
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("llmgw started with the route %q:\n%s", route, out)
	}
	if err == nil || !strings.Contains(string(out), want) {
		t.Fatalf("route %q: got %v, want a refusal that says %q:\n%s", route, err, want, out)
	}
}

// `llmgw validate` warns about a tenancy models limit that matches no
// model, and a tools limit that names no MCP server: a misspelt glob would
// leave the tenant with nothing.
func TestValidateWarnsAboutGlobsThatMatchNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf(`{
	admin off
	storage file_system %s
	llm {
		model gpt-mini {
			engine sim
			min 0
		}
		org acme {
			models gtp-*
			tools gihtub.* github__*
			team t {
				project p {
					models gpt-*
					key k1 %s
				}
			}
		}
	}
}

:%d {
	route /mcp* {
		llm_quota
		llm_mcp {
			server github {
				url http://127.0.0.1:1/mcp
			}
		}
	}
}
`, filepath.Join(dir, "storage"), tenancy.HashKey("secret-1"), freePort(t))
	if err := os.WriteFile(filepath.Join(dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "validate", "--config", filepath.Join(dir, "Caddyfile"))
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "matches no model in the catalog") || !strings.Contains(string(out), "gtp-*") {
		t.Errorf("validate did not warn about gtp-*:\n%s", out)
	}
	if strings.Contains(string(out), `"glob":"gpt-*"`) {
		t.Errorf("validate warned about gpt-*, which matches gpt-mini:\n%s", out)
	}
	if !strings.Contains(string(out), "names no MCP server") || !strings.Contains(string(out), "gihtub.*") {
		t.Errorf("validate did not warn about the tools glob gihtub.*:\n%s", out)
	}
	if strings.Contains(string(out), `"glob":"github__*"`) {
		t.Errorf("validate warned about github__*, which names the server github:\n%s", out)
	}
}
