package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/release"
)

// TestReleaseIsReproducible runs scripts/release twice for linux/amd64
// into two directories with the same key: the tarball, SHA256SUMS and
// SHA256SUMS.minisig must be byte-identical, the tarball laid out as
// docs/releases.md says, the sums right and the signature good (checked
// by this package and, when installed, by the minisign tool).
func TestReleaseIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("builds llmgw twice")
	}
	root := repoRoot(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "release.key")
	pub := filepath.Join(dir, "release.pub")
	if err := run([]string{"keygen", key, pub}); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, out := range []string{a, b} {
		cmd := exec.Command(filepath.Join(root, "scripts", "release"), "v0.0.7", out)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "LLMGW_RELEASE_TARGETS=linux/amd64", "LLMGW_RELEASE_KEY="+key)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/release: %v\n%s", err, b)
		}
	}
	files := []string{"SHA256SUMS", "SHA256SUMS.minisig", "llmgw_v0.0.7_linux_amd64.tar.gz"}
	for _, f := range files {
		x, y := read(t, filepath.Join(a, f)), read(t, filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same commit (%d and %d bytes)", f, len(x), len(y))
		}
	}
	entries, _ := os.ReadDir(a)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, files) {
		t.Errorf("release files: got %v, want %v", got, files)
	}
	checkSums(t, a)
	checkLayout(t, filepath.Join(a, files[2]))
	checkSignature(t, a, pub)
}

func checkSums(t *testing.T, dir string) {
	t.Helper()
	tgz := read(t, filepath.Join(dir, "llmgw_v0.0.7_linux_amd64.tar.gz"))
	sum := sha256.Sum256(tgz)
	want := hex.EncodeToString(sum[:]) + "  llmgw_v0.0.7_linux_amd64.tar.gz\n"
	if got := string(read(t, filepath.Join(dir, "SHA256SUMS"))); got != want {
		t.Errorf("SHA256SUMS: got %q, want %q", got, want)
	}
}

// checkLayout reads the tarball: one top directory, the binary, the
// licence, the README, the example configs and deploy/, owned by 0 with
// one fixed time.
func checkLayout(t *testing.T, path string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(read(t, path)))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	names := map[string]bool{}
	var mtime int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names[h.Name] = true
		if !strings.HasPrefix(h.Name, "llmgw_v0.0.7_linux_amd64/") {
			t.Errorf("%s is outside the top directory llmgw_v0.0.7_linux_amd64/", h.Name)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: owner %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		if mtime == 0 {
			mtime = h.ModTime.Unix()
		} else if h.ModTime.Unix() != mtime {
			t.Errorf("%s: mtime %d, want %d as every entry's", h.Name, h.ModTime.Unix(), mtime)
		}
		if h.Name == "llmgw_v0.0.7_linux_amd64/llmgw" && h.Mode&0o111 == 0 {
			t.Errorf("the binary is not executable: mode %o", h.Mode)
		}
	}
	for _, want := range []string{"llmgw", "LICENSE", "README.md", "Caddyfile.example", "deploy/release.pub"} {
		if !names["llmgw_v0.0.7_linux_amd64/"+want] {
			t.Errorf("the tarball lacks llmgw_v0.0.7_linux_amd64/%s", want)
		}
	}
}

func checkSignature(t *testing.T, dir, pub string) {
	t.Helper()
	pk, err := release.ParsePublicKey(string(read(t, pub)))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := release.ParseSignature(read(t, filepath.Join(dir, "SHA256SUMS.minisig")))
	if err != nil {
		t.Fatal(err)
	}
	if err := release.Verify(read(t, filepath.Join(dir, "SHA256SUMS")), sig, pk); err != nil {
		t.Errorf("the signature of SHA256SUMS: %v", err)
	}
	minisign, err := exec.LookPath("minisign")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("minisign is not installed; .ci/install installs it")
		}
		t.Log("minisign is not installed: the signature is not checked with it")
		return
	}
	out, err := exec.Command(minisign, "-Vm", filepath.Join(dir, "SHA256SUMS"), "-P", pk.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Signature and comment signature verified") {
		t.Errorf("minisign -Vm SHA256SUMS -P %s: %v\n%s", pk, err, out)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatalf("finding the repository: %v", err)
	}
	return strings.TrimSpace(string(out))
}
