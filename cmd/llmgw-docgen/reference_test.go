package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReferenceUpToDate generates the configuration reference in memory
// and fails when docs/reference differs from it: a field, its doc
// comment or default, or a Caddyfile subdirective changed without the
// reference being generated again.
func TestReferenceUpToDate(t *testing.T) {
	root := repoRoot(t)
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	const fix = "; run go run ./cmd/llmgw-docgen from the repository's root to regenerate"
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(root, refDir, name))
		if err != nil {
			t.Errorf("stale: %s/%s is missing%s", refDir, name, fix)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("stale: %s/%s differs from what the modules give (first difference at line %d)%s", refDir, name, firstDiff(got, want), fix)
		}
	}
	old, _ := filepath.Glob(filepath.Join(root, refDir, "*.md"))
	for _, f := range old {
		if _, ok := files[filepath.Base(f)]; !ok {
			t.Errorf("stale: %s/%s is of no registered module%s", refDir, filepath.Base(f), fix)
		}
	}
}

func firstDiff(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestReferenceCoversModules checks what the reference must hold: every
// llmgw module, with its Caddyfile directive's subdirectives where it has
// a parser, fields with their types, defaults from "Default: …"
// comments, and the link to the admin API's OpenAPI document.
func TestReferenceCoversModules(t *testing.T) {
	files, err := generate(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	index := string(files["config.md"])
	for _, want := range []string{"http.handlers.llm_router", "http.handlers.llm_quota", "http.llm_guardrails.checks.pii",
		"http.llm_router.policies.prefix_affinity", "admin.api.llm", "`GET /llm/openapi.json`", "| `llm` | global option |"} {
		if !strings.Contains(index, want) {
			t.Errorf("config.md does not name %s", want)
		}
	}
	router := string(files["http.handlers.llm_router.md"])
	for _, want := range []string{
		"| `first_byte_timeout` | duration (`\"30s\"`, or nanoseconds) | 5m |",
		"- `policy`\n  - `balance_abs`",
		"- `expose_replica`",
	} {
		if !strings.Contains(router, want) {
			t.Errorf("http.handlers.llm_router.md lacks %q", want)
		}
	}
	app := string(files["llm.md"])
	for _, want := range []string{"| `models[].scaling.idle_timeout` |", "    - `project`\n", "      - `key`\n", "- `cluster`\n  - `advertise`"} {
		if !strings.Contains(app, want) {
			t.Errorf("llm.md lacks %q", want)
		}
	}
}
