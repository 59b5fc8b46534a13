package setup

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSetupEnvKeepsOperatorValues: a re-run adds what llmgw.env lacks and
// keeps what an operator filled in, so the same answers change nothing.
func TestSetupEnvKeepsOperatorValues(t *testing.T) {
	vars := []envVar{{Name: "OPENAI_API_KEY", Why: "a key"}, {Name: "LLMGW_CLUSTER_SECRET", Why: "the secret", Value: "s3cr3t"}}
	first := renderEnv(nil, vars)
	if !bytes.Contains(first, []byte("\n#OPENAI_API_KEY=\n")) || !bytes.Contains(first, []byte("\nLLMGW_CLUSTER_SECRET=s3cr3t\n")) {
		t.Fatalf("first llmgw.env:\n%s", first)
	}
	if again := renderEnv(first, vars); !bytes.Equal(again, first) {
		t.Errorf("the same answers changed llmgw.env:\n%s", again)
	}
	filled := bytes.Replace(first, []byte("#OPENAI_API_KEY="), []byte("OPENAI_API_KEY=sk-real"), 1)
	if again := renderEnv(filled, vars); !bytes.Equal(again, filled) {
		t.Errorf("a re-run changed what the operator filled in:\n%s", again)
	}
	more := renderEnv(filled, append(vars, envVar{Name: "S3_ACCESS_KEY", Why: "s3"}))
	if !bytes.HasPrefix(more, filled) || !bytes.Contains(more, []byte("#S3_ACCESS_KEY=")) {
		t.Errorf("a new variable was not added after the old ones:\n%s", more)
	}
}

// TestSetupDiff shows a changed line as - then +, with context, and
// hides the values of a secret file.
func TestSetupDiff(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		mask     bool
		want     string
	}{
		{"changed line", "a\nb\nc\n", "a\nB\nc\n", false, "  a\n- b\n+ B\n  c\n"},
		{"far lines elided", "1\n2\n3\n4\n5\n6\n7\n", "1\n2\n3\n4\n5\n6\nx\n", false, "  …\n  5\n  6\n- 7\n+ x\n"},
		{"secret masked", "# k\nK=old\n", "# k\nK=new\n", true, "  # k\n- K=… (hidden)\n+ K=… (hidden)\n"},
		{"new file", "", "x\n", false, "+ x\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			lineDiff(&b, tc.old, tc.new, tc.mask)
			if b.String() != tc.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tc.want)
			}
		})
	}
}

// TestSetupChecks: answers that cannot work are refused with how to fix
// them.
func TestSetupChecks(t *testing.T) {
	tests := []struct {
		name string
		edit func(*setupAnswers)
		want string
	}{
		{"listen", func(a *setupAnswers) { a.Listen = "localhost:http" }, "give host:port or :port"},
		{"tenant", func(a *setupAnswers) { a.Tenant = "acme/research" }, "give organisation/team/project"},
		{"provider key in plain text", func(a *setupAnswers) { a.ProviderKind, a.ProviderKey = "openai", "sk-abc-123"; providerDefaults(a) }, "give the name of an environment variable"},
		{"s3 scheme", func(a *setupAnswers) { a.S3Endpoint, a.S3Bucket = "https://s3.example.com", "w" }, "no scheme; --s3-tls for https"},
		{"sentinel master", func(a *setupAnswers) { a.Sentinels, a.Advertise = []string{"10.0.0.5:26379"}, "10.0.0.11:7443" }, "--sentinel needs --sentinel-master"},
		{"redis and sentinel", func(a *setupAnswers) { a.Redis, a.Sentinels = "redis://h:6379", []string{"h:26379"} }, "not both"},
		{"ldap group", func(a *setupAnswers) { a.LDAPURL, a.LDAPBaseDN, a.LDAPAdmin = "ldaps://h", "dc=x", "admins" }, "--ldap-admin-group"},
		{"oidc without console", func(a *setupAnswers) { a.Console, a.OIDCIssuer = false, "https://login.example.com" }, "the console's"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := defaultAnswers()
			a.Node = "n1"
			tc.edit(&a)
			err := a.check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
	a := defaultAnswers()
	if err := a.check(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// TestSetupInstallsBinary: --enable copies the running binary to --bin
// when nothing is there, executable, and leaves one that is.
func TestSetupInstallsBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a := defaultAnswers()
	a.Binary = filepath.Join(t.TempDir(), "bin", "llmgw")
	var out strings.Builder
	r := &setupRun{out: &out}
	if err := r.installBinary(&a); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(a.Binary)
	want, _ := os.ReadFile(self)
	info, err := os.Stat(a.Binary)
	if err != nil || !bytes.Equal(got, want) || info.Mode().Perm() != 0o755 {
		t.Fatalf("installed %s: %v, mode %v, same bytes %v", a.Binary, err, info.Mode(), bytes.Equal(got, want))
	}
	if err := os.WriteFile(a.Binary, []byte("kept"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.installBinary(&a); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(a.Binary); string(got) != "kept" {
		t.Errorf("a binary already there was replaced")
	}
}
