package release

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSignVerify(t *testing.T) {
	sk, err := GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := GenerateKey(nil)
	data := []byte("abc  llmgw_v1.0.0_linux_amd64.tar.gz\n")
	sig, err := ParseSignature(Sign(sk, data, "timestamp:1\tfile:SHA256SUMS").MarshalText())
	if err != nil {
		t.Fatal(err)
	}
	pk, err := ParsePublicKey(string(sk.Public().MarshalText()))
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(data, sig, other.Public(), pk); err != nil {
		t.Errorf("a good signature: %v", err)
	}
	changed := sig
	changed.TrustedComment = "timestamp:2\tfile:SHA256SUMS"
	for _, tc := range []struct {
		name string
		data []byte
		sig  Signature
		keys []PublicKey
		want string
	}{
		{"changed file", append([]byte("x"), data...), sig, []PublicKey{pk}, "key " + sk.ID.String() + ": signature does not match"},
		{"changed trusted comment", data, changed, []PublicKey{pk}, "trusted comment was changed"},
		{"key not trusted", data, sig, []PublicKey{other.Public()}, "signed by key " + sk.ID.String() + ", which is not trusted (trusted: " + other.ID.String() + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.data, tc.sig, tc.keys...)
			if !errors.Is(err, ErrBadSignature) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	back, err := ParseSecretKey(MarshalSecretKey(sk))
	if err != nil || back.ID != sk.ID || !back.Key.Equal(sk.Key) {
		t.Errorf("secret key round trip: %v", err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "RWQ", "untrusted comment: x\nnot base64!"} {
		if _, err := ParsePublicKey(s); err == nil || !strings.Contains(err.Error(), "RW") {
			t.Errorf("ParsePublicKey(%q): %v, want an error naming the RW… line", s, err)
		}
	}
	if _, err := ParseSignature([]byte("untrusted comment: x\nAAAA\n")); err == nil {
		t.Error("ParseSignature of two lines: no error")
	}
}

// TestMinisignInterop: the minisign tool verifies this package's
// signature with its public key, signs with its secret key file, and
// this package verifies what it signed.
func TestMinisignInterop(t *testing.T) {
	minisign, err := exec.LookPath("minisign")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("minisign is not installed; .ci/install installs it")
		}
		t.Skip("minisign is not installed")
	}
	dir := t.TempDir()
	sk, _ := GenerateKey(nil)
	file, keyFile := filepath.Join(dir, "SHA256SUMS"), filepath.Join(dir, "release.key")
	os.WriteFile(file, []byte("sums\n"), 0o644)
	os.WriteFile(file+".minisig", Sign(sk, []byte("sums\n"), "timestamp:1\tfile:SHA256SUMS\thashed").MarshalText(), 0o644)
	os.WriteFile(keyFile, MarshalSecretKey(sk), 0o600)
	out, err := exec.Command(minisign, "-Vm", file, "-P", sk.Public().String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Signature and comment signature verified") {
		t.Errorf("minisign -V: %v\n%s", err, out)
	}
	other := filepath.Join(dir, "other")
	os.WriteFile(other, []byte("other\n"), 0o644)
	cmd := exec.Command(minisign, "-S", "-s", keyFile, "-m", other, "-t", "by minisign")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("minisign -S: %v\n%s", err, out)
	}
	raw, _ := os.ReadFile(other + ".minisig")
	sig, err := ParseSignature(raw)
	if err == nil {
		err = Verify([]byte("other\n"), sig, sk.Public())
	}
	if err != nil || sig.TrustedComment != "by minisign" {
		t.Errorf("minisign's signature: %v (trusted comment %q)", err, sig.TrustedComment)
	}
}

// The key llmgw trusts is the one the repository publishes.
func TestProjectKeyIsPublished(t *testing.T) {
	b, err := os.ReadFile("../deploy/release.pub")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParsePublicKey(string(b))
	if err != nil || k.String() != ProjectKey {
		t.Fatalf("deploy/release.pub (%v) is not ProjectKey %s:\n%s", err, ProjectKey, b)
	}
}
