package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDockerfile checks the Dockerfile without Docker: it has a build
// stage and a final stage FROM scratch; the final stage runs no command
// (there is no shell to run one), starts llmgw in exec form, and runs as
// a user that is not root; and its go build uses the release script's
// flags, so an image holds the same binary as a release tarball.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	stages := dockerStages(string(read(t, filepath.Join(root, "Dockerfile"))))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and a final stage", len(stages))
	}
	final := stages[len(stages)-1]
	if from := strings.Fields(final[0]); len(from) < 2 || from[1] != "scratch" {
		t.Errorf("final stage: %q, want FROM scratch (no shell, no packages)", final[0])
	}
	var user string
	for _, line := range final {
		switch word := strings.ToUpper(strings.Fields(line)[0]); word {
		case "RUN", "SHELL":
			t.Errorf("final stage: %q needs a shell; the image has none", line)
		case "ENTRYPOINT", "CMD":
			if !strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(line, strings.Fields(line)[0])), "[") {
				t.Errorf("final stage: %q is in shell form; use the exec form [\"/usr/bin/llmgw\", …]", line)
			}
		case "USER":
			user = strings.Fields(line)[1]
		case "COPY":
			if strings.Contains(line, "/bin/sh") || strings.Contains(line, "busybox") {
				t.Errorf("final stage: %q copies a shell in", line)
			}
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "0" || name == "root" {
		t.Errorf("final stage: USER %q, want a user that is not root", user)
	}
	checkBuildFlags(t, strings.Join(stages[0], "\n"), string(read(t, filepath.Join(root, "scripts", "release"))))
}

// dockerStages splits a Dockerfile into its stages' instructions (line
// continuations joined, comments dropped), each starting with its FROM.
func dockerStages(text string) [][]string {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var stages [][]string
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], line)
		}
	}
	return stages
}

var (
	scriptLdflags = regexp.MustCompile(`(?m)^ldflags="([^"]+)"`)
	dockerLdflags = regexp.MustCompile(`-ldflags="([^"]+)"`)
)

// checkBuildFlags compares the go build of the Dockerfile's build stage
// with the release script's: static, trimmed paths, no VCS stamp, and
// the same ldflags once the version and commit are named alike.
func checkBuildFlags(t *testing.T, build, script string) {
	t.Helper()
	for _, flag := range []string{"CGO_ENABLED=0", "-trimpath", "-buildvcs=false", "./cmd/llmgw"} {
		if !strings.Contains(build, flag) {
			t.Errorf("Dockerfile: the build stage's go build lacks %s (scripts/release builds with it)", flag)
		}
		if !strings.Contains(script, flag) {
			t.Errorf("scripts/release: its go build lacks %s", flag)
		}
	}
	s, d := scriptLdflags.FindStringSubmatch(script), dockerLdflags.FindStringSubmatch(build)
	if s == nil || d == nil {
		t.Fatalf("ldflags: not found (script %v, Dockerfile %v)", s != nil, d != nil)
	}
	norm := strings.NewReplacer("$version", "V", "$commit", "C", "${VERSION}", "V", "${COMMIT}", "C")
	if got, want := norm.Replace(d[1]), norm.Replace(s[1]); got != want {
		t.Errorf("Dockerfile ldflags:\n got %s\nwant %s (those of scripts/release)", got, want)
	}
}
