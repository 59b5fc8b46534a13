package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/release"
)

// stampedBinary builds llmgw stamped with version into dir/llmgw, as a
// release is built (no -race: a race-instrumented llmgw upgrade takes
// longer to read a release than the test's streams last).
func stampedBinary(t *testing.T, dir, version string) string {
	t.Helper()
	bin := filepath.Join(dir, "llmgw")
	build := exec.Command("go", "build", "-o", bin, "-trimpath", "-ldflags",
		"-s -w -X github.com/llmgw/llmgw/modules/internal/buildinfo.version="+version+" -X github.com/llmgw/llmgw/modules/internal/buildinfo.commit=0123456789abcdef", ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building llmgw %s: %v\n%s", version, err, out)
	}
	return bin
}

// releaseDir writes a release of one binary as scripts/release lays it
// out: llmgw_<version>_<os>_<arch>.tar.gz, SHA256SUMS and, signed by sk,
// SHA256SUMS.minisig. It returns the tarball's path.
func releaseDir(t *testing.T, dir, version, platform string, bin []byte, sk release.SecretKey) string {
	t.Helper()
	name := "llmgw_" + version + "_" + strings.ReplaceAll(platform, "/", "_")
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a -race llmgw is large
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{name + "/llmgw", 0o755, bin}, {name + "/LICENSE", 0o644, []byte("Apache-2.0\n")}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(f.data)
	}
	tw.Close()
	zw.Close()
	tgz := filepath.Join(dir, name+".tar.gz")
	sum := sha256.Sum256(buf.Bytes())
	sums := []byte(hex.EncodeToString(sum[:]) + "  " + name + ".tar.gz\n")
	sig := release.Sign(sk, sums, "timestamp:0\tfile:SHA256SUMS\thashed")
	for path, data := range map[string][]byte{tgz: buf.Bytes(), filepath.Join(dir, "SHA256SUMS"): sums, filepath.Join(dir, "SHA256SUMS.minisig"): sig.MarshalText()} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return tgz
}

// testKey makes a key pair and writes its public key to dir/name.pub.
func testKey(t *testing.T, dir, name string) (release.SecretKey, string) {
	t.Helper()
	sk, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub := filepath.Join(dir, name+".pub")
	if err := os.WriteFile(pub, sk.Public().MarshalText(), 0o644); err != nil {
		t.Fatal(err)
	}
	return sk, pub
}

// startBinary runs bin (not the tests' llmgw) with a gateway's config.
func startBinary(t *testing.T, bin, llmBlock string) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	g.writeConfig(llmBlock, "")
	saved := binary
	binary = bin
	defer func() { binary = saved }()
	g.start()
	return g
}

func (g *gateway) version() llmapi.BuildInfo {
	var b llmapi.BuildInfo
	g.adminGet("/llm/version", &b)
	return b
}

const upgradeModel = `
		model chat {
			engine sim
			option ttft 20ms
			option tokens_per_second 20
			min 1
			max 1
		}`

// TestUpgradeUnderStreams: llmgw v0.0.1 serves 32 streams of a few
// seconds; llmgw upgrade with a signed v0.0.2 tarball replaces the binary
// and restarts it in place: every stream ends complete ([DONE], every
// token), GET /llm/version then says v0.0.2 with the same PID, the old
// binary is kept as .previous, and llmgw upgrade --rollback, under
// streams again, brings v0.0.1 back.
func TestUpgradeUnderStreams(t *testing.T) {
	dir := t.TempDir()
	v1 := stampedBinary(t, filepath.Join(dir, "v1"), "v0.0.1")
	v2 := stampedBinary(t, filepath.Join(dir, "v2"), "v0.0.2")
	rel := filepath.Join(dir, "release")
	os.MkdirAll(rel, 0o755)
	sk, pub := testKey(t, dir, "test")
	v2bytes, _ := os.ReadFile(v2)
	tgz := releaseDir(t, rel, "v0.0.2", runtime.GOOS+"/"+runtime.GOARCH, v2bytes, sk)

	installed := filepath.Join(dir, "bin", "llmgw")
	os.MkdirAll(filepath.Dir(installed), 0o755)
	copyExec(t, v1, installed)
	g := startBinary(t, installed, upgradeModel)
	g.readyReplicas("chat", 1)
	before := g.version()
	if before.Version != "v0.0.1" || before.PID == 0 {
		t.Fatalf("GET /llm/version before: %+v, want v0.0.1 with a pid", before)
	}

	admin := fmt.Sprintf("127.0.0.1:%d", g.admin)
	out := upgradeUnderStreams(t, g, "upgrade", installed, "upgrade", tgz, "--key", pub, "--admin", admin)
	after := g.version()
	if after.Version != "v0.0.2" || after.PID != before.PID {
		t.Errorf("GET /llm/version after the upgrade: %+v, want v0.0.2 with pid %d\n%s", after, before.PID, out)
	}
	if !sameFile(t, installed+".previous", v1) || !sameFile(t, installed, v2) {
		t.Errorf("after the upgrade: want %s to be v0.0.2 and its .previous v0.0.1", installed)
	}

	out = upgradeUnderStreams(t, g, "rollback", installed, "upgrade", "--rollback", "--admin", admin)
	if back := g.version(); back.Version != "v0.0.1" || back.PID != before.PID {
		t.Errorf("GET /llm/version after the rollback: %+v, want v0.0.1 with pid %d\n%s", back, before.PID, out)
	}
	if !sameFile(t, installed, v1) || !sameFile(t, installed+".previous", v2) {
		t.Errorf("after the rollback: want %s to be v0.0.1 and its .previous v0.0.2", installed)
	}
}

// upgradeUnderStreams opens 32 streams of 8 s, runs llmgw with args
// while they are open, and checks that llmgw was asked to restart while
// they were (the command says "is restarting") and that every stream
// ended complete. It returns the command's output.
func upgradeUnderStreams(t *testing.T, g *gateway, what, bin string, args ...string) string {
	t.Helper()
	const n, tokens = 32, 160 // 8 s at 20 tokens/s
	streams := openStreams(t, g, "chat", n, tokens)
	ended := make(chan streamResult, n)
	var last atomic.Int64
	go func() {
		for range n {
			r := <-streams
			last.Store(time.Now().UnixNano())
			ended <- r
		}
	}()
	var out syncBuffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var asked time.Time
	for asked.IsZero() && cmd.ProcessState == nil {
		if strings.Contains(out.String(), "is restarting") {
			asked = time.Now()
		}
		time.Sleep(10 * time.Millisecond)
		if !processAlive(cmd.Process.Pid) {
			break
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: llmgw %s: %v\n%s", what, strings.Join(args, " "), err, out.String())
	}
	checkStreams(t, what, ended, n, tokens)
	if asked.IsZero() || last.Load() < asked.UnixNano() {
		t.Errorf("%s: the restart was asked for at %v, after the last stream ended: the test proves nothing\n%s", what, asked, out.String())
	}
	return out.String()
}

func copyExec(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err == nil {
		err = os.WriteFile(dst, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// TestRestartRouteAsAnAttacker: POST /llm/restart runs only the binary at
// llmgw's own path with its own arguments; a caller naming another
// binary in the body or the query is refused with a 400 saying why, and
// llmgw goes on as it was (same PID, not restarting).
func TestRestartRouteAsAnAttacker(t *testing.T) {
	g := startGateway(t, upgradeModel, "")
	before := g.version()
	admin := fmt.Sprintf("http://127.0.0.1:%d", g.admin)
	for _, tc := range []struct{ name, url, body string }{
		{"a binary in the body", admin + "/llm/restart", `{"binary":"/bin/sh","args":["-c","id"]}`},
		{"a path in the query", admin + "/llm/restart?binary=/tmp/evil", ``},
		{"GET", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var body []byte
			if tc.url == "" {
				r, err := http.Get(admin + "/llm/restart")
				if err != nil {
					t.Fatal(err)
				}
				resp = r
				var e struct{ Error string }
				json.NewDecoder(r.Body).Decode(&e)
				r.Body.Close()
				body = []byte(e.Error)
			} else {
				resp, body = post(t, tc.url, tc.body)
			}
			if resp.StatusCode != http.StatusBadRequest && resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("got %d %s, want 400 (or 405 for GET)", resp.StatusCode, body)
			}
			if tc.url != "" && !strings.Contains(string(body), "its own path") {
				t.Errorf("the refusal does not say why: %s", body)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	if now := g.version(); now.PID != before.PID || strings.Contains(g.logs.String(), "restarting in place") {
		t.Errorf("llmgw restarted after refused requests: %+v", now)
	}
}

// TestUpgradeRefuses: llmgw upgrade refuses a release signed by a key it
// does not trust (naming the key), SHA256SUMS changed after signing, a
// tarball that does not match the signed sums, and a binary for another
// platform; each time the binary on disk stays as it was and no
// .previous appears.
func TestUpgradeRefuses(t *testing.T) {
	dir := t.TempDir()
	installed := filepath.Join(dir, "bin", "llmgw")
	os.MkdirAll(filepath.Dir(installed), 0o755)
	copyExec(t, binary, installed)
	trustedKey, pub := testKey(t, dir, "trusted")
	strangerKey, _ := testKey(t, dir, "stranger")
	// The checks of the signature and the sums come before the binary is
	// read: any bytes do. The platform's needs an executable of another
	// architecture: a small one of this machine's (true) with its ELF
	// e_machine changed.
	good := []byte("not read: refused before")
	platform := runtime.GOOS + "/" + runtime.GOARCH
	truePath, err := exec.LookPath("true")
	if runtime.GOOS != "linux" || err != nil {
		t.Skip("needs Linux and its true(1)")
	}
	other, _ := os.ReadFile(truePath)
	other[18], other[19] = 0xB7, 0 // ELF e_machine: arm64
	otherName := "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other[18], otherName = 0x3E, "linux/amd64"
	}
	for _, tc := range []struct {
		name   string
		key    release.SecretKey
		bin    []byte
		tamper func(rel, tgz string)
		want   string
	}{
		{"signed by a key not trusted", strangerKey, good, nil, "signed by key " + strangerKey.ID.String() + ", which is not trusted"},
		{"sums changed after signing", trustedKey, good, func(rel, _ string) {
			appendFile(t, filepath.Join(rel, "SHA256SUMS"), "0000  llmgw_evil.tar.gz\n")
		}, "key " + trustedKey.ID.String() + ": signature does not match"},
		{"tarball changed after signing", trustedKey, good, func(_, tgz string) { appendFile(t, tgz, "x") }, "the signed SHA256SUMS says"},
		{"binary for another platform", trustedKey, other, nil, "is for " + otherName},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rel := t.TempDir()
			tgz := releaseDir(t, rel, "v0.0.9", platform, tc.bin, tc.key)
			if tc.tamper != nil {
				tc.tamper(rel, tgz)
			}
			before, _ := os.ReadFile(installed)
			out, err := exec.Command(installed, "upgrade", tgz, "--key", pub, "--no-restart").CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "refused") {
				t.Errorf("llmgw upgrade: %v, want a refusal saying %q:\n%s", err, tc.want, out)
			}
			if after, _ := os.ReadFile(installed); !bytes.Equal(before, after) {
				t.Error("the binary on disk changed")
			}
			if _, err := os.Stat(installed + ".previous"); err == nil {
				t.Error("a .previous appeared")
			}
		})
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(s)
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestRestartThroughLLMAdmin: on a site's llm_admin, POST /llm/restart
// needs the admin role: an operator, a viewer and a tenant admin get a
// 403 naming the role it needs, and llmgw goes on (same PID); a viewer
// reads GET /llm/version.
func TestRestartThroughLLMAdmin(t *testing.T) {
	g := adminSite(t)
	before := g.version()
	for _, token := range []string{"ops-token", "watcher-token", "lead-token"} {
		code, _, body := siteCall(t, g, token, "POST", "/llm/restart", "")
		if code != http.StatusForbidden || !strings.Contains(body, "needs the admin role") {
			t.Errorf("POST /llm/restart with %s: got %d %s, want 403 saying it needs the admin role", token, code, body)
		}
	}
	code, _, body := siteCall(t, g, "watcher-token", "GET", "/llm/version", "")
	var b llmapi.BuildInfo
	if code != 200 || json.Unmarshal([]byte(body), &b) != nil || b.PID != before.PID || b.Version == "" {
		t.Errorf("GET /llm/version as a viewer: got %d %s, want the build with pid %d", code, body, before.PID)
	}
	time.Sleep(300 * time.Millisecond)
	if strings.Contains(g.logs.String(), "restarting in place") {
		t.Error("llmgw began a restart for a caller without the admin role")
	}
}
