package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// quickstartVersion is the version the test's release is built as.
const quickstartVersion = "v0.99.0-quickstart"

// TestQuickstartFromTarball is a first run on a machine that has only a
// release tarball: scripts/release builds this platform's tarball from
// the committed tree, tar extracts it, and from then on only what it
// holds is used, with no Go on PATH and a home of its own. llmgw setup
// (flags only, no systemd) writes the config and prints the admin token
// and the first key once; the config runs as docs/setup.md says without
// systemd; the console signs in with the token, the key gets chat
// completions (streamed and not), and a call without a key gets a 401.
func TestQuickstartFromTarball(t *testing.T) {
	root, commit := quickstartRepo(t)
	tarball := buildRelease(t, root)
	top := extractRelease(t, tarball)
	checkReleaseFiles(t, root, top)

	home := t.TempDir()
	env := cleanEnv(home)
	if out, err := shell(home, env, "command -v go").CombinedOutput(); err == nil {
		t.Fatalf("the clean environment (%s) has Go: %s", env[0], out)
	}
	bin := filepath.Join(top, "llmgw")
	version := exec.Command(bin, "version")
	version.Env, version.Dir = env, home
	out, err := version.Output()
	if want := "llmgw " + quickstartVersion + " (commit " + commit[:12] + ", caddy v2."; err != nil || !strings.HasPrefix(string(out), want) {
		t.Errorf("llmgw version of the release: %v %q, want it to start with %q", err, out, want)
	}

	s := quickstartSetup(t, bin, home, env)
	g := runAsDocumented(t, bin, home, env, s)
	if _, err := os.Stat(filepath.Join(home, "gw", "data", "caddy")); err != nil {
		t.Errorf("llmgw keeps its data outside --data: %v", err)
	}
	checkQuickstartConsole(t, g, s.token)
	checkQuickstartChat(t, g, s.key)
}

// quickstartRepo is the repository's root (the test runs in cmd/llmgw)
// and its HEAD, which scripts/release builds.
func quickstartRepo(t *testing.T) (string, string) {
	t.Helper()
	for _, tool := range []string{"bash", "tar", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH; scripts/release needs it", tool)
			}
			t.Skipf("%s is not on PATH: the release is not built", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("the commit scripts/release builds: %v", err)
	}
	return root, strings.TrimSpace(string(out))
}

// buildRelease runs scripts/release for this platform alone, unsigned,
// and returns its tarball.
func buildRelease(t *testing.T, root string) string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "scripts", "release"), quickstartVersion, out)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LLMGW_RELEASE_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "LLMGW_RELEASE_TARGETS="+runtime.GOOS+"/"+runtime.GOARCH)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release %s: %v\n%s", quickstartVersion, err, b)
	}
	tarball := filepath.Join(out, releaseName()+".tar.gz")
	if _, err := os.Stat(tarball); err != nil {
		t.Fatalf("scripts/release wrote no %s: %v", filepath.Base(tarball), err)
	}
	return tarball
}

func releaseName() string {
	return "llmgw_" + quickstartVersion + "_" + runtime.GOOS + "_" + runtime.GOARCH
}

// extractRelease runs tar -xzf on the tarball in a fresh directory and
// returns the one directory it holds.
func extractRelease(t *testing.T, tarball string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("tar", "-xzf", tarball, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xzf %s: %v\n%s", filepath.Base(tarball), err, out)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != releaseName() || !entries[0].IsDir() {
		t.Fatalf("the tarball holds %v, want the one directory %s", entries, releaseName())
	}
	return filepath.Join(dir, releaseName())
}

// checkReleaseFiles: the binary, the licence, the README, every example
// config of the repository and the systemd units are in the release.
func checkReleaseFiles(t *testing.T, root, top string) {
	t.Helper()
	want := []string{"llmgw", "LICENSE", "README.md", "deploy/release.pub",
		"deploy/systemd/llmgw.service", "deploy/systemd/llmgw-node@.service"}
	examples, _ := filepath.Glob(filepath.Join(root, "Caddyfile*.example"))
	for _, e := range examples {
		want = append(want, filepath.Base(e))
	}
	if len(examples) < 2 {
		t.Errorf("the repository has the example configs %v, want Caddyfile.example and Caddyfile.console.example", examples)
	}
	for _, f := range want {
		info, err := os.Stat(filepath.Join(top, f))
		if err != nil || info.Size() == 0 {
			t.Errorf("the release lacks %s (or it is empty): %v", f, err)
		}
	}
	if info, err := os.Stat(filepath.Join(top, "llmgw")); err == nil && info.Mode()&0o111 == 0 {
		t.Errorf("the release's llmgw is not executable: %v", info.Mode())
	}
}

// cleanEnv is a machine's environment without Go: the system's PATH, and
// a home and XDG directories of the test's own.
func cleanEnv(home string) []string {
	return []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "TMPDIR=" + filepath.Join(home, "tmp"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state")}
}

// shell runs a command line with sh in dir with env.
func shell(dir string, env []string, line string, args ...string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", append([]string{"-c", line}, args...)...)
	cmd.Dir, cmd.Env = dir, env
	return cmd
}

// quickstart is what setup made: its ports, and the secrets it printed.
type quickstart struct {
	http, admin int
	token, key  string
}

// quickstartSetup runs the trial setup of docs/setup.md in home (gw/ and
// gw/data/, no unit) on free ports, and validates what it wrote.
func quickstartSetup(t *testing.T, bin, home string, env []string) *quickstart {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := &quickstart{http: freePort(t), admin: freePort(t)}
	cmd := exec.Command(bin, "setup", "--yes", "--dir", "./gw", "--data", "./gw/data", "--units", "",
		"--listen", fmt.Sprintf("127.0.0.1:%d", s.http), "--admin", fmt.Sprintf("127.0.0.1:%d", s.admin),
		"--models", "sim", "--console")
	cmd.Dir, cmd.Env, cmd.Stdin = home, env, strings.NewReader("")
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	token, key := tokenLine.FindStringSubmatch(out), keyLine.FindStringSubmatch(out)
	if err != nil || token == nil || key == nil {
		t.Fatalf("llmgw setup: %v (want an admin token and a key printed)\n%s", err, out)
	}
	s.token, s.key = token[1], key[1]
	for _, secret := range []string{s.token, s.key} {
		if n := strings.Count(out, secret); n != 1 {
			t.Errorf("setup printed a secret %d times, want once:\n%s", n, out)
		}
	}
	caddyfile := filepath.Join(home, "gw", "Caddyfile")
	if !strings.Contains(out, "Run it: llmgw run --config "+caddyfile) {
		t.Errorf("setup does not say how to run %s:\n%s", caddyfile, out)
	}
	validate := exec.Command(bin, "validate", "--config", caddyfile)
	validate.Dir, validate.Env = home, env
	if b, err := validate.CombinedOutput(); err != nil || !strings.Contains(string(b), "Valid configuration") {
		t.Fatalf("llmgw validate --config %s: %v\n%s", caddyfile, err, b)
	}
	return s
}

// runAsDocumented runs the config setup wrote as docs/setup.md's "Running
// it without systemd" says: llmgw.env's variables exported, the data
// directory as XDG_DATA_HOME, llmgw run in the foreground.
func runAsDocumented(t *testing.T, bin, home string, env []string, s *quickstart) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: home, http: s.http, admin: s.admin, logs: &syncBuffer{}, exited: make(chan struct{}),
		base: fmt.Sprintf("http://127.0.0.1:%d", s.http)}
	g.cmd = shell(home, env, `set -a; . ./gw/llmgw.env; set +a
XDG_DATA_HOME=$PWD/gw/data XDG_CONFIG_HOME=$PWD/gw/data/config exec "$0" run --config gw/Caddyfile`, bin)
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		g.stop()
		if t.Failed() {
			t.Logf("llmgw logs:\n%s", g.logs.String())
		}
	})
	g.waitReady()
	return g
}

// checkQuickstartConsole: the console's page loads and the printed admin
// token signs in to it; its session reads the models.
func checkQuickstartConsole(t *testing.T, g *gateway, token string) {
	t.Helper()
	if code, body := exampleRequest(t, "GET", g.base+"/console/", "", ""); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("GET /console/: %d %.200s", code, body)
	}
	if code, _, body, _ := login(t, g, `{"method":"token","token":"sk-llmgw-not-the-token"}`); code != 401 {
		t.Errorf("signing in with a wrong token: %d %s, want 401", code, body)
	}
	code, s, body, _ := login(t, g, fmt.Sprintf(`{"method":"token","token":%q}`, token))
	if code != 200 || s.Role != "admin" {
		t.Fatalf("signing in with the printed admin token: %d %s", code, body)
	}
	if code, _, body := siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", s.cookie); code != 200 || !strings.Contains(body, "sim-chat") {
		t.Errorf("GET /llm/models signed in: %d %.300s", code, body)
	}
}

// checkQuickstartChat: the printed key gets a chat completion and a
// streamed one; no key, or a wrong one, gets a 401.
func checkQuickstartChat(t *testing.T, g *gateway, key string) {
	t.Helper()
	const chat = `{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`
	if code, body := exampleRequest(t, "POST", g.base+"/v1/chat/completions", "Bearer "+key, chat); code != 200 || !strings.Contains(body, `"content":"`) {
		t.Errorf("a chat completion with the printed key: %d %.300s", code, body)
	}
	for _, auth := range []string{"", "Bearer sk-llmgw-not-a-key"} {
		if code, body := exampleRequest(t, "POST", g.base+"/v1/chat/completions", auth, chat); code != 401 || !strings.Contains(body, `"error"`) {
			t.Errorf("a chat completion with Authorization %q: %d %.300s, want a 401 error", auth, code, body)
		}
	}
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(strings.Replace(chat, "{", `{"stream":true,`, 1)))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var deltas int
	var last string
	for sc := bufio.NewScanner(resp.Body); sc.Scan(); {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			last = line
			if strings.Contains(line, `"content":"`) {
				deltas++
			}
		}
	}
	rest, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || deltas == 0 || last != "data: [DONE]" {
		t.Errorf("a streamed chat completion with the printed key: %d %s, %d content deltas, last event %q %s",
			resp.StatusCode, resp.Header.Get("Content-Type"), deltas, last, rest)
	}
}
