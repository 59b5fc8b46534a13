package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// setupDirs is a setup's directories under a test's temp dir, and the
// flags that put it there (the unit runs the test's binary).
type setupDirs struct {
	dir, data, units string
	http, admin      int
}

func newSetupDirs(t *testing.T) *setupDirs {
	d := t.TempDir()
	return &setupDirs{dir: filepath.Join(d, "etc"), data: filepath.Join(d, "etc", "data"), units: filepath.Join(d, "units"),
		http: freePort(t), admin: freePort(t)}
}

func (s *setupDirs) flags(more ...string) []string {
	return append([]string{"setup", "--dir", s.dir, "--data", s.data, "--units", s.units, "--bin", binary,
		"--admin", fmt.Sprintf("127.0.0.1:%d", s.admin), "--ollama-url", "http://127.0.0.1:1"}, more...)
}

// runSetup runs llmgw setup with standard input that is not a terminal,
// away from the repository (setup needs nothing of it).
func runSetup(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Stdin, cmd.Dir = strings.NewReader(""), t.TempDir()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

var (
	tokenLine = regexp.MustCompile(`admin token \(shown once; only its SHA-256 is kept\): (sk-llmgw-\S+)`)
	keyLine   = regexp.MustCompile(`API key "[^"]+" of \S+ \(shown once; only its SHA-256 is kept\): (sk-llmgw-\S+)`)
)

// validateSetup runs llmgw validate on a Caddyfile.
func validateSetup(t *testing.T, caddyfile string) {
	t.Helper()
	cmd := exec.Command(binary, "validate", "--config", caddyfile)
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("llmgw validate %s: %v\n%s", caddyfile, err, out)
	}
}

// verifyUnit runs systemd-analyze verify on a unit setup wrote.
func verifyUnit(t *testing.T, path string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("systemd-analyze is not on PATH; install systemd")
		}
		t.Log("systemd-analyze is not on PATH: the unit is not verified")
		return
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}

// TestSetupFlags sets up a gateway with flags alone, then runs what it
// wrote: validate accepts the Caddyfile, the unit verifies, and the
// running gateway takes the printed key for a chat completion and the
// printed admin token on its admin API and console.
func TestSetupFlags(t *testing.T) {
	help, _ := runSetup(t, "setup", "--help")
	for _, want := range []string{"Examples:", "--listen", "--models", "--redis", "--sentinel", "--mirror-dir", "--s3-bucket", "--console", "--oidc-issuer", "--ldap-url", "--units", "--enable", "--yes"} {
		if !strings.Contains(help, want) {
			t.Errorf("llmgw setup --help lacks %q:\n%s", want, help)
		}
	}
	s := newSetupDirs(t)
	out, err := runSetup(t, s.flags("--yes", "--models", "sim", "--listen", fmt.Sprintf("127.0.0.1:%d", s.http))...)
	if err != nil {
		t.Fatalf("llmgw setup: %v\n%s", err, out)
	}
	token, key := tokenLine.FindStringSubmatch(out), keyLine.FindStringSubmatch(out)
	if token == nil || key == nil {
		t.Fatalf("setup printed no admin token or key:\n%s", out)
	}
	for _, want := range []string{"CPU cores", "memory", "GPUs", "llama-server", "wrote " + filepath.Join(s.dir, "Caddyfile")} {
		if !strings.Contains(out, want) {
			t.Errorf("setup's output lacks %q:\n%s", want, out)
		}
	}
	caddyfile := filepath.Join(s.dir, "Caddyfile")
	written, _ := os.ReadFile(caddyfile)
	if bytes.Contains(written, []byte(token[1])) || bytes.Contains(written, []byte(key[1])) {
		t.Fatalf("the Caddyfile holds a secret in plain text:\n%s", written)
	}
	assertMode(t, filepath.Join(s.dir, "llmgw.env"), 0o600)
	validateSetup(t, caddyfile)
	verifyUnit(t, filepath.Join(s.units, "llmgw.service"))

	g := &gateway{t: t, dir: s.dir, http: s.http, admin: s.admin, logs: &syncBuffer{}}
	g.start()
	checkSetupGateway(t, g.base, token[1], key[1])
}

// checkSetupGateway drives a gateway setup made: the console, the admin
// API with the token, a chat completion with the key.
func checkSetupGateway(t *testing.T, base, token, key string) {
	t.Helper()
	if code, body := get(t, base+"/console/", ""); code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("GET /console/: %d %.200s", code, body)
	}
	if code, body := get(t, base+"/llm/models", ""); code != 401 {
		t.Errorf("GET /llm/models without the token: %d %.200s, want 401", code, body)
	}
	if code, body := get(t, base+"/llm/models", token); code != 200 || !strings.Contains(body, "sim-chat") {
		t.Errorf("GET /llm/models with the printed token: %d %.300s", code, body)
	}
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(`{"model":"sim-chat","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"content"`) {
		t.Errorf("a chat completion with the printed key: %d %.300s", resp.StatusCode, body)
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func assertMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != want {
		t.Errorf("%s: mode %04o, want %04o", path, info.Mode().Perm(), want)
	}
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(p)
				files[p] = string(b)
			}
			return nil
		})
	}
	return files
}

// TestSetupRerun runs setup again: with the same answers it changes
// nothing and says so; with another answer it shows the line that would
// change and writes nothing until --yes, keeping the admin token and key.
func TestSetupRerun(t *testing.T) {
	s := newSetupDirs(t)
	listen := fmt.Sprintf("127.0.0.1:%d", s.http)
	out, err := runSetup(t, s.flags("--yes", "--listen", listen, "--redis", "redis://127.0.0.1:6379/0", "--node", "n1", "--advertise", "127.0.0.1:7443")...)
	if err != nil {
		t.Fatalf("llmgw setup: %v\n%s", err, out)
	}
	before := snapshot(t, s.dir, s.units)
	secret := regexp.MustCompile(`LLMGW_CLUSTER_SECRET=(\S+)`).FindStringSubmatch(before[filepath.Join(s.dir, "llmgw.env")])
	if secret == nil || strings.Contains(out, secret[1]) {
		t.Fatalf("llmgw.env has no cluster secret, or setup printed it:\n%s\n%s", before[filepath.Join(s.dir, "llmgw.env")], out)
	}
	verifyUnit(t, filepath.Join(s.units, "llmgw-node@.service"))

	out, err = runSetup(t, s.flags()...)
	if err != nil || !strings.Contains(out, "Nothing to change") || tokenLine.MatchString(out) || keyLine.MatchString(out) {
		t.Fatalf("a re-run with the same answers: %v\n%s", err, out)
	}
	if after := snapshot(t, s.dir, s.units); !equalMaps(before, after) {
		t.Fatal("a re-run with the same answers changed files")
	}

	other := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	out, err = runSetup(t, s.flags("--listen", other)...)
	for _, want := range []string{"- http://" + listen + " {", "+ http://" + other + " {", "nothing was written: run again with --yes"} {
		if !strings.Contains(out, want) {
			t.Errorf("a re-run with another address lacks %q:\n%s", want, out)
		}
	}
	if err == nil || strings.Contains(out, secret[1]) {
		t.Errorf("a re-run that would change files without --yes succeeded, or showed the cluster secret:\n%s", out)
	}
	if after := snapshot(t, s.dir, s.units); !equalMaps(before, after) {
		t.Fatal("a re-run without confirmation changed files")
	}

	out, err = runSetup(t, s.flags("--listen", other, "--yes")...)
	after := snapshot(t, s.dir, s.units)
	caddyfile := filepath.Join(s.dir, "Caddyfile")
	if err != nil || !strings.Contains(after[caddyfile], "http://"+other+" {") || tokenLine.MatchString(out) || keyLine.MatchString(out) {
		t.Fatalf("a confirmed re-run: %v\n%s", err, out)
	}
	if hashes(before[caddyfile]) != hashes(after[caddyfile]) || before[filepath.Join(s.dir, "llmgw.env")] != after[filepath.Join(s.dir, "llmgw.env")] {
		t.Errorf("a re-run made new secrets:\n%s\n%s", before[caddyfile], after[caddyfile])
	}
}

// hashes are the SHA-256s in a Caddyfile.
func hashes(s string) string {
	return strings.Join(regexp.MustCompile(`[0-9a-f]{64}`).FindAllString(s, -1), ",")
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// terminal is a program run on a pseudo-terminal, as a person would.
type terminal struct {
	t    *testing.T
	f    *os.File
	mu   sync.Mutex
	seen bytes.Buffer
	done int // how much of seen expect has consumed
}

func startTerminal(t *testing.T, args ...string) (*terminal, *exec.Cmd) {
	cmd := exec.Command(binary, args...)
	cmd.Dir = t.TempDir()
	f, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	term := &terminal{t: t, f: f}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := f.Read(buf)
			term.mu.Lock()
			term.seen.Write(buf[:n])
			term.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { f.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return term, cmd
}

// expect waits for text after what was expected before.
func (p *terminal) expect(text string) string {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		rest := p.seen.String()[p.done:]
		if i := strings.Index(rest, text); i >= 0 {
			p.done += i + len(text)
			p.mu.Unlock()
			return rest[:i+len(text)]
		}
		p.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.t.Fatalf("waited for %q; the terminal shows:\n%s", text, p.seen.String()[p.done:])
	return ""
}

func (p *terminal) answer(text string) {
	if _, err := p.f.WriteString(text + "\r"); err != nil {
		p.t.Fatal(err)
	}
}

func (p *terminal) all() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen.String()
}

// TestSetupInteractive answers setup's questions on a terminal as a
// person would: Enter for defaults, a wrong address and a wrong yes-or-no
// asked again with why, then checks what it wrote.
func TestSetupInteractive(t *testing.T) {
	s := newSetupDirs(t)
	term, cmd := startTerminal(t, s.flags()...)
	term.expect("CPU cores")
	term.expect("== Site ==")
	term.expect("Address [:8080]: ")
	term.answer("not an address")
	term.expect(`! the address "not an address": give a port such as :8080`)
	term.expect("Address [:8080]: ")
	term.answer(fmt.Sprintf("127.0.0.1:%d", s.http))
	term.expect("== Models and engines ==")
	term.expect("Serve the sim demo model (sim-chat)? (Y/n): ")
	term.answer("")
	term.expect("An outside provider: openai (any OpenAI-compatible API), anthropic, or none [none]: ")
	term.answer("")
	term.expect("== Keys and tenants ==")
	term.expect("Make a first API key? (Y/n): ")
	term.answer("maybe")
	term.expect(`! "maybe" is not an answer to this question: type y for yes or n for no (Enter: yes)`)
	term.expect("Make a first API key? (Y/n): ")
	term.answer("y")
	term.expect("its organisation/team/project [default/main/first]: ")
	term.answer("acme/research")
	term.expect(`give organisation/team/project`)
	term.expect("its organisation/team/project [default/main/first]: ")
	term.answer("acme/research/alpha")
	term.expect("Set up a mirror? (y/N): ")
	term.answer("")
	term.expect("Is this machine a node of a cluster? (y/N): ")
	term.answer("n")
	term.expect("Serve the console? (Y/n): ")
	term.answer("")
	term.expect("an OpenID Connect issuer URL, or none [none]: ")
	term.answer("")
	term.expect("an LDAP URL (ldaps://host:636), or none [none]: ")
	term.answer("")
	term.steps([]step{{"Write 4 files? (Y/n): ", ""}})
	term.expect("API key")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("setup: %v\n%s", err, term.all())
	}
	caddyfile := filepath.Join(s.dir, "Caddyfile")
	b, _ := os.ReadFile(caddyfile)
	for _, want := range []string{"org acme {", "team research {", "project alpha {", fmt.Sprintf("http://127.0.0.1:%d {", s.http), "model sim-chat {", "llm_console"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the Caddyfile lacks %q:\n%s", want, b)
		}
	}
	if !tokenLine.MatchString(term.all()) || !keyLine.MatchString(term.all()) {
		t.Errorf("setup printed no token or key:\n%s", term.all())
	}
	validateSetup(t, caddyfile)
	verifyUnit(t, filepath.Join(s.units, "llmgw.service"))
	assertMode(t, filepath.Join(s.dir, "llmgw.env"), 0o600)
	assertMode(t, filepath.Join(s.dir, "setup.json"), 0o600)
}

// step is a question setup shows and a person's answer.
type step struct{ prompt, answer string }

func (p *terminal) steps(steps []step) {
	p.t.Helper()
	for _, s := range steps {
		p.expect(s.prompt)
		p.answer(s.answer)
	}
}

// rerunSteps answers every question of a re-run with Enter but the
// address.
func rerunSteps(addr string) []step {
	return []step{
		{"Address [" + addr + "]: ", ""}, {"(sim-chat)? (Y/n): ", ""}, {"or none [none]: ", ""},
		{"Make a first API key? (Y/n): ", ""}, {"[acme/research/alpha]: ", ""}, {"Set up a mirror? (y/N): ", ""},
		{"node of a cluster? (y/N): ", ""}, {"Serve the console? (Y/n): ", ""}, {"issuer URL, or none [none]: ", ""},
		{"or none [none]: ", ""},
	}
}

// TestSetupInteractiveRerun runs setup again on a terminal: Enter on
// every question changes nothing and says so; another address shows the
// line it would change and, declined, writes nothing.
func TestSetupInteractiveRerun(t *testing.T) {
	s := newSetupDirs(t)
	addr := fmt.Sprintf("127.0.0.1:%d", s.http)
	out, err := runSetup(t, s.flags("--listen", addr, "--tenant", "acme/research/alpha")...)
	if err != nil {
		t.Fatalf("llmgw setup: %v\n%s", err, out)
	}
	before := snapshot(t, s.dir, s.units)

	term, cmd := startTerminal(t, s.flags()...)
	term.expect("The answers of the last setup")
	term.steps(rerunSteps(addr))
	term.expect("Nothing to change")
	if err := cmd.Wait(); err != nil || tokenLine.MatchString(term.all()) {
		t.Fatalf("a re-run answered with Enter: %v\n%s", err, term.all())
	}

	other := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	term, cmd = startTerminal(t, s.flags()...)
	steps := rerunSteps(addr)
	steps[0].answer = other
	term.steps(steps)
	term.expect("- http://" + addr + " {")
	term.expect("+ http://" + other + " {")
	term.steps([]step{{"Write 2 files? (y/N): ", "n"}})
	term.expect("Nothing was written.")
	_ = cmd.Wait()
	if after := snapshot(t, s.dir, s.units); !equalMaps(before, after) {
		t.Fatalf("a declined re-run changed files:\n%s", term.all())
	}
}

// TestSetupEveryPart sets up every part from flags (an outside provider,
// a mirror of a directory and S3, a node of a Sentinel-watched cluster,
// OpenID Connect and LDAP sign-in): llmgw validate accepts the
// Caddyfile with the variables llmgw.env names set, and no credential
// is in the Caddyfile.
func TestSetupEveryPart(t *testing.T) {
	s := newSetupDirs(t)
	out, err := runSetup(t, s.flags("--yes", "--listen", fmt.Sprintf(":%d", s.http), "--provider", "openai",
		"--mirror-dir", filepath.Join(s.dir, "weights"), "--s3-endpoint", "127.0.0.1:9000", "--s3-bucket", "weights",
		"--sentinel", "127.0.0.1:26379,127.0.0.1:26380", "--sentinel-master", "mymaster", "--node", "n1", "--advertise", "127.0.0.1:7443",
		"--redis-password-env", "REDIS_PASSWORD", "--oidc-issuer", "https://login.example.com/realms/staff", "--oidc-secret-env", "OIDC_SECRET",
		"--ldap-url", "ldaps://ldap.example.com", "--ldap-base-dn", "ou=people,dc=example,dc=com",
		"--ldap-admin-group", "cn=LLM Admins,ou=groups,dc=example,dc=com", "--ldap-bind-dn", "cn=llmgw,dc=example,dc=com")...)
	if err != nil {
		t.Fatalf("llmgw setup: %v\n%s", err, out)
	}
	caddyfile, _ := os.ReadFile(filepath.Join(s.dir, "Caddyfile"))
	env, _ := os.ReadFile(filepath.Join(s.dir, "llmgw.env"))
	for _, want := range []string{"#OPENAI_API_KEY=", "#S3_ACCESS_KEY=", "#REDIS_PASSWORD=", "#OIDC_SECRET=", "#LDAP_BIND_PASSWORD="} {
		if !bytes.Contains(env, []byte(want)) {
			t.Errorf("llmgw.env lacks %q:\n%s", want, env)
		}
	}
	secret := regexp.MustCompile(`(?m)^LLMGW_CLUSTER_SECRET=([0-9a-f]{64})$`).FindSubmatch(env)
	if secret == nil || bytes.Contains(caddyfile, secret[1]) {
		t.Fatalf("no 64-hex cluster secret in llmgw.env, or it is in the Caddyfile:\n%s", env)
	}
	for _, want := range []string{"api_key {env.OPENAI_API_KEY}", "password {env.REDIS_PASSWORD}", "secret {env.LLMGW_CLUSTER_SECRET}",
		"client_secret {env.OIDC_SECRET}", "bind_password {env.LDAP_BIND_PASSWORD}", "access_key_env S3_ACCESS_KEY",
		`role admin "cn=LLM Admins,ou=groups,dc=example,dc=com"`, "sentinel mymaster 127.0.0.1:26379 127.0.0.1:26380"} {
		if !bytes.Contains(caddyfile, []byte(want)) {
			t.Errorf("the Caddyfile lacks %q:\n%s", want, caddyfile)
		}
	}
	cmd := exec.Command(binary, "validate", "--config", filepath.Join(s.dir, "Caddyfile"))
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+s.data, "LLMGW_CLUSTER_SECRET="+string(secret[1]),
		"OPENAI_API_KEY=sk-test", "OIDC_SECRET=x", "LDAP_BIND_PASSWORD=x", "REDIS_PASSWORD=x")
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("llmgw validate: %v\n%s", err, out)
	}
	verifyUnit(t, filepath.Join(s.units, "llmgw-node@.service"))
}
