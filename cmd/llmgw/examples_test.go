package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exampleKey is the secret of the key the example configs declare.
const exampleKey = "sk-llmgw-example-key-change-me"

var (
	adminLine = regexp.MustCompile(`(?m)^(\s*)admin\s+\S+`)
	// siteLine is a site block's first line with a port: ":8080 {",
	// "localhost:8080 {", "http://localhost:8080 {".
	siteLine = regexp.MustCompile(`(?m)^((?:https?://)?[^\s{#:]*):(\d+)(\s*\{)`)
	// portlessSite is a site block's first line without a port.
	portlessSite = regexp.MustCompile(`(?m)^[^\s{#:]+\.[^\s{#]*\s*\{`)
)

// TestExampleConfigsStart runs every example config of the repository
// (Caddyfile*.example at its root, Caddyfile* under deploy/) as written, with only its admin
// address and its sites' ports moved to free ports: llmgw fmt leaves it
// unchanged, llmgw validate accepts it, llmgw run starts it, its model
// answers a chat with the example's key, and, where it serves the
// console, the console's page loads and its admin token signs in. The
// whole configs among the manual's Caddyfiles adapt
// (TestManualCaddyfilesAdapt); the three-node example of
// docs/cluster.md runs in TestReadmeThreeNodes.
func TestExampleConfigsStart(t *testing.T) {
	files := exampleConfigs(t)
	if len(files) < 2 {
		t.Fatalf("want Caddyfile.example and Caddyfile.console.example at the root, found %v", files)
	}
	const token = "console-example-token-0123456789abcdef"
	sum := sha256.Sum256([]byte(token))
	t.Setenv("LLMGW_CONSOLE_TOKEN_SHA256", hex.EncodeToString(sum[:]))
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(binary, "fmt", f).Output(); err != nil || string(out) != string(raw) {
				t.Errorf("llmgw fmt %s changes it (or fails: %v):\n%s", f, err, out)
			}
			g := startExampleConfig(t, string(raw))
			chatWithExampleKey(t, g)
			if strings.Contains(string(raw), "llm_console") {
				checkConsole(t, g, token)
			}
		})
	}
}

// exampleConfigs lists the example configs: Caddyfile*.example at the
// root and any Caddyfile* under deploy/.
func exampleConfigs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../Caddyfile*.example")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir("../../deploy", func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "Caddyfile") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// startExampleConfig validates and runs an example config with its
// admin endpoint and sites on free ports.
func startExampleConfig(t *testing.T, cfg string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	cfg = moveToFreePorts(t, g, cfg)
	file := filepath.Join(g.dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	validate := exec.Command(binary, "validate", "--config", file)
	validate.Env = append(os.Environ(), "HOME="+g.dir, "XDG_DATA_HOME="+filepath.Join(g.dir, "data"))
	if out, err := validate.CombinedOutput(); err != nil {
		t.Fatalf("llmgw validate: %v\n%s", err, out)
	}
	g.start()
	return g
}

// moveToFreePorts puts the config's admin endpoint and the ports of its
// sites on free ports, the first site's in g.http.
func moveToFreePorts(t *testing.T, g *gateway, cfg string) string {
	t.Helper()
	if site := portlessSite.FindString(cfg); site != "" {
		t.Fatalf("the example has a site without a port (%q): this test cannot move it", site)
	}
	admin := fmt.Sprintf("admin 127.0.0.1:%d", g.admin)
	if adminLine.MatchString(cfg) {
		cfg = adminLine.ReplaceAllString(cfg, "${1}"+admin)
	} else {
		cfg = "{\n\t" + admin + "\n}\n" + cfg
	}
	moved := map[string]int{}
	cfg = siteLine.ReplaceAllStringFunc(cfg, func(line string) string {
		m := siteLine.FindStringSubmatch(line)
		p, ok := moved[m[2]]
		if !ok {
			p = freePort(t)
			moved[m[2]] = p
		}
		if g.http == 0 {
			g.http = p
		}
		return m[1] + ":" + strconv.Itoa(p) + m[3]
	})
	if g.http == 0 {
		t.Fatal("the example has no site with a port")
	}
	return cfg
}

// chatWithExampleKey asks the config's first model for a chat with the
// example's key, as the README's quick start does with curl.
func chatWithExampleKey(t *testing.T, g *gateway) {
	t.Helper()
	var models struct {
		Data []struct{ ID string } `json:"data"`
	}
	status, body := exampleRequest(t, "GET", g.base+"/v1/models", "Bearer "+exampleKey, "")
	if status != 200 || json.Unmarshal([]byte(body), &models) != nil || len(models.Data) == 0 {
		t.Fatalf("GET /v1/models with the example's key: %d %s", status, body)
	}
	req := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, models.Data[0].ID)
	status, body = exampleRequest(t, "POST", g.base+"/v1/chat/completions", "Bearer "+exampleKey, req)
	if status != 200 || !strings.Contains(body, `"content":"`) {
		t.Fatalf("a chat with the example's key: %d %s", status, body)
	}
	if status, _ := exampleRequest(t, "POST", g.base+"/v1/chat/completions", "", req); status != 401 {
		t.Errorf("a chat without a key: %d, want 401", status)
	}
}

// checkConsole loads the console's page, signs in with the admin token
// as the page does, and reads the models through the site's admin API;
// the access log has a line for the chat.
func checkConsole(t *testing.T, g *gateway, token string) {
	t.Helper()
	status, body := exampleRequest(t, "GET", g.base+"/console/", "", "")
	if status != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("GET /console/: %d %.200s", status, body)
	}
	login := fmt.Sprintf(`{"method":"token","token":%q}`, token)
	if status, body := exampleRequest(t, "POST", g.base+"/llm/auth/login", "", login); status != 200 || !strings.Contains(body, `"role":"admin"`) {
		t.Errorf("signing in with the admin token: %d %s", status, body)
	}
	if status, body := exampleRequest(t, "GET", g.base+"/llm/models", "Bearer "+token, ""); status != 200 || !strings.Contains(body, `"chat"`) {
		t.Errorf("GET /llm/models with the admin token: %d %s", status, body)
	}
	if status, _ := exampleRequest(t, "GET", g.base+"/llm/models", "Bearer wrong-token", ""); status != 401 {
		t.Errorf("GET /llm/models with a wrong token: %d, want 401", status)
	}
	waitFor(t, 10*time.Second, "an access log line for the chat", func() bool {
		return strings.Contains(g.logs.String(), `"llm_model":"chat"`)
	})
}

func exampleRequest(t *testing.T, method, url, auth, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var (
	caddyfileFence = regexp.MustCompile("^(\\s*)```(?:caddyfile|caddy)\\s*$")
	envPlaceholder = regexp.MustCompile(`\{\$([A-Z0-9_]+)\}`)
	// wholeConfigStart is a whole config's first line: the global
	// options block, or a site address (with a port or a dot).
	wholeConfigStart = regexp.MustCompile(`^(\{|[^\s{]*[.:][^\s{]*\s*\{)$`)
	// sketch finds a block's parts left out: "{ … }", or a line of "…".
	sketch = regexp.MustCompile(`(?m)\{\s*…\s*\}|^\s*(…|\.\.\.)\s*$`)
)

// manualCaddyfiles gives the Caddyfile blocks of README.md and
// docs/*.md that are whole configs, by file and line.
func manualCaddyfiles(t *testing.T) map[string]string {
	t.Helper()
	files, _ := filepath.Glob("../../docs/*.md")
	out := map[string]string{}
	for _, f := range append([]string{"../../README.md"}, files...) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		for i := 0; i < len(lines); i++ {
			m := caddyfileFence.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			var block []string
			j := i + 1
			for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
				block = append(block, strings.TrimPrefix(lines[j], m[1]))
			}
			if first := firstConfigLine(block); wholeConfigStart.MatchString(first) {
				out[fmt.Sprintf("%s:%d", strings.TrimPrefix(f, "../../"), i+1)] = strings.Join(block, "\n") + "\n"
			}
			i = j
		}
	}
	return out
}

func firstConfigLine(block []string) string {
	for _, l := range block {
		if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "#") {
			return s
		}
	}
	return ""
}

// TestManualCaddyfilesAdapt adapts every Caddyfile of the manual that is
// a whole config (a global options block or a site, not a fragment) with
// the real binary, so that none has a syntax error or a subdirective that
// no parser takes; {$VAR} placeholders get a value. A sketch that leaves
// parts out ({ … }) is skipped.
func TestManualCaddyfilesAdapt(t *testing.T) {
	blocks := manualCaddyfiles(t)
	if len(blocks) < 8 {
		t.Fatalf("found %d whole Caddyfiles in README.md and docs/, want the manual's (8 or more)", len(blocks))
	}
	dir := t.TempDir()
	for where, block := range blocks {
		if sketch.MatchString(block) {
			t.Logf("%s: a sketch (it leaves parts out with …), not adapted", where)
			continue
		}
		file := filepath.Join(dir, "Caddyfile")
		if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(binary, "adapt", "--config", file)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		for _, m := range envPlaceholder.FindAllStringSubmatch(block, -1) {
			v := "n1"
			if strings.HasSuffix(m[1], "PORT") {
				v = "7441"
			}
			cmd.Env = append(cmd.Env, m[1]+"="+v)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: llmgw adapt fails: %v\n%s", where, err, lastLine(string(out)))
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
