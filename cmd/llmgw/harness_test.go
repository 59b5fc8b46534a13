package main

import (
	"bytes"
	"cmp"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// binary is the llmgw built once for the end-to-end tests, in binDir
// (this test process's own directory) unless LLMGW_TEST_BIN_DIR names
// a directory where it was built already.
var (
	binary     string
	binDir     string
	buildFlags []string
	// raceBuild is set when llmgw is built with the race detector.
	raceBuild bool
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llmgw-e2e-")
	if err == nil {
		binDir = dir
		binary, err = llmgwBinary(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// llmgwBinary builds llmgw into dir, or takes the one in
// $LLMGW_TEST_BIN_DIR, built as these tests would build it: .ci/e2e runs
// many test processes side by side and builds llmgw once for all of them.
func llmgwBinary(dir string) (string, error) {
	if pre := os.Getenv("LLMGW_TEST_BIN_DIR"); pre != "" {
		path := filepath.Join(pre, "llmgw")
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("LLMGW_TEST_BIN_DIR: %w; build llmgw there first or unset it", err)
		}
		race := false
		for _, s := range info.Settings {
			race = race || (s.Key == "-race" && s.Value == "true")
		}
		if race != raceBuild {
			return "", fmt.Errorf("LLMGW_TEST_BIN_DIR: %s is built with -race=%v and the tests run with -race=%v; build it as the tests run", path, race, raceBuild)
		}
		return path, nil
	}
	path := filepath.Join(dir, "llmgw")
	build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", path, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building llmgw: %w", err)
	}
	return path, nil
}

// freePort returns a free port for a server a test starts. It picks from
// below the kernel's ephemeral range, where nothing else here picks:
// engine plugins give their replicas ports the kernel chooses (port 0),
// and a port chosen that way for a gateway could be handed to another
// gateway's replica before the gateway binds it. A port is the test's
// until it ends: no other test, in this process or in another one
// (.ci/e2e runs several side by side), is handed it meanwhile.
func freePort(t *testing.T) int {
	t.Helper()
	for range portHigh - portLow {
		p := portLow + int(nextPort.Add(1)%uint32(portHigh-portLow))
		if !claimPort(t, p) {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d", portLow, portHigh)
	return 0
}

// claimPort takes port p for the rest of the test with a lock on a file
// named after it in a directory every test process on this machine
// shares, so that two processes never hand out the same port between
// the check that it is free and the server binding it. The files stay:
// removing a lock file would let two processes lock different files of
// the same name. Without the directory it claims every port.
func claimPort(t *testing.T, p int) bool {
	dir := filepath.Join(os.TempDir(), "llmgw-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(p)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	t.Cleanup(func() { f.Close() })
	return true
}

// The ports freePort hands out: below Linux's default ephemeral range
// (32768-60999) and above the ports services listen on by default.
const portLow, portHigh = 20000, 32000

// nextPort starts at a random place so that test processes running side
// by side (go test runs packages in parallel) seldom try the same ports.
var nextPort = func() *atomic.Uint32 {
	var n atomic.Uint32
	n.Store(uint32(rand.IntN(portHigh - portLow)))
	return &n
}()

// gateway is a running llmgw process.
type gateway struct {
	t      *testing.T
	dir    string
	cmd    *exec.Cmd
	http   int
	admin  int
	base   string
	logs   *syncBuffer
	exited chan struct{}
	quota  *string // llm_quota's block, when it runs
	before string  // more directives before the router
	routes string  // more routes of the site, after /v1/*
	bin    string  // the llmgw binary it runs; default: the tests' (binary)
}

func (g *gateway) quotaDirective() string {
	s := g.before
	if g.quota != nil {
		s = "\t\tllm_quota {\n" + *g.quota + "\n\t\t}\n" + s
	}
	return s
}

// startGatewayBefore is startGateway with handler directives (such as
// llm_quota and llm_cache blocks) before the router.
func startGatewayBefore(t *testing.T, llmBlock, before string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, before: before}
	g.writeConfig(llmBlock, "")
	g.start()
	return g
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startGateway writes the Caddyfile (global options block, then sites;
// {HTTP} and {ADMIN} are replaced by free ports) and runs llmgw with it.
func startGateway(t *testing.T, llmBlock, routerBlock string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.writeConfig(llmBlock, routerBlock)
	g.start()
	return g
}

// startQuotaGateway is startGateway with llm_quota (configured by
// quotaBlock) in front of the router.
func startQuotaGateway(t *testing.T, llmBlock, quotaBlock string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	g.quota = &quotaBlock
	g.writeConfig(llmBlock, "")
	g.start()
	return g
}

// start runs llmgw with the config in g.dir.
func (g *gateway) start() {
	t := g.t
	t.Helper()
	g.base = fmt.Sprintf("http://127.0.0.1:%d", g.http)
	g.exited = make(chan struct{})
	g.cmd = exec.Command(cmp.Or(g.bin, binary), "run", "--config", filepath.Join(g.dir, "Caddyfile"))
	g.cmd.Env = append(os.Environ(), "HOME="+g.dir, "XDG_DATA_HOME="+filepath.Join(g.dir, "data"),
		"XDG_CONFIG_HOME="+filepath.Join(g.dir, "config"))
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		g.stop()
		if strings.Contains(g.logs.String(), "DATA RACE") {
			t.Error("the race detector found a data race in llmgw")
		}
		if t.Failed() {
			t.Logf("llmgw logs:\n%s", g.logs.String())
		}
	})
	g.waitReady()
}

func (g *gateway) writeConfig(llmBlock, routerBlock string) {
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	log {
		level DEBUG
	}
	llm {
%s
	}
}

:%d {
	log
	header {
		defer
		X-Llm-Model {http.llm.model}
		X-Llm-Replica {http.llm.replica}
		X-Llm-Completion-Tokens {http.llm.usage.completion_tokens}
	}
	route /v1/* {
%s
		llm_router {
%s
		}
	}
%s
}
`, g.admin, filepath.Join(g.dir, "storage"), llmBlock, g.http, g.quotaDirective(), routerBlock, g.routes)
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

func (g *gateway) waitReady() {
	g.t.Helper()
	// Generous: under -race on a busy two-core machine a start with
	// several engines has taken over 30 s.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-g.exited:
			g.t.Fatalf("llmgw exited at start:\n%s", g.logs.String())
		default:
		}
		resp, err := http.Get(g.base + "/v1/models")
		if err == nil {
			resp.Body.Close()
			// 401: llm_quota runs and wants a key, so the server is up.
			// Server: Caddy, so that it is this gateway answering and not
			// a server that took its port before it bound it.
			up := resp.StatusCode == 200 || resp.StatusCode == 401
			if up && resp.Header.Get("Server") == "Caddy" && g.llmAppStarted() {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.t.Fatalf("llmgw did not start:\n%s", g.logs.String())
}

// llmAppStarted says whether the admin API serves the llm app: Caddy
// starts its apps one by one, so the HTTP server can answer while the llm
// app is still starting, and /llm/models is then a 404. Every gateway the
// harness starts has an admin API, so one that does not answer has not
// started.
func (g *gateway) llmAppStarted() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/llm/models", g.admin))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode != http.StatusNotFound
}

// stop stops llmgw gracefully and waits for it.
func (g *gateway) stop() {
	if g.cmd.Process == nil {
		return
	}
	_ = g.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-g.exited:
	case <-time.After(20 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.exited
		g.t.Errorf("llmgw did not stop within 20s")
	}
}

// reload applies a new config through `llmgw reload`.
func (g *gateway) reload(llmBlock, routerBlock string) {
	g.t.Helper()
	g.writeConfig(llmBlock, routerBlock)
	out, err := exec.Command(binary, "reload", "--config", filepath.Join(g.dir, "Caddyfile"),
		"--address", fmt.Sprintf("127.0.0.1:%d", g.admin)).CombinedOutput()
	if err != nil {
		g.t.Fatalf("reload: %v\n%s", err, out)
	}
}

func (g *gateway) client() openai.Client {
	return openai.NewClient(option.WithBaseURL(g.base+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// adminGet decodes the JSON answer of an admin API route.
func (g *gateway) adminGet(path string, v any) {
	g.t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", g.admin, path))
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		g.t.Fatalf("GET %s: %v", path, err)
	}
}

// models returns the admin API's view of the catalog.
func (g *gateway) models() map[string]llmapi.ModelStatus {
	var list []llmapi.ModelStatus
	g.adminGet("/llm/models", &list)
	out := make(map[string]llmapi.ModelStatus, len(list))
	for _, m := range list {
		out[m.Name] = m
	}
	return out
}

// enginePIDs returns the plugin processes by engine type.
func (g *gateway) enginePIDs() map[string]int {
	var list []llmapi.EngineStatus
	g.adminGet("/llm/engines", &list)
	out := map[string]int{}
	for _, e := range list {
		out[e.Type] = e.PID
	}
	return out
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyReplicas waits until model has n ready replicas and returns them.
func (g *gateway) readyReplicas(model string, n int) []llmapi.ReplicaStatus {
	g.t.Helper()
	var rs []llmapi.ReplicaStatus
	waitFor(g.t, 30*time.Second, fmt.Sprintf("%d ready replicas of %s", n, model), func() bool {
		rs = g.models()[model].Replicas
		return len(rs) == n
	})
	return rs
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) has exited and waits to be reaped.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func post(t *testing.T, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	return resp, buf.Bytes()
}

var bg = context.Background()
