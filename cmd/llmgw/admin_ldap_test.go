package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slapdServer is an OpenLDAP slapd started by a test, with its own
// config and database in a temp dir, on loopback ports: ldap:// (with
// StartTLS) and ldaps://, both with a self-signed certificate.
type slapdServer struct {
	ldap, ldaps int
	caFile      string
}

const ldapSuffix = "dc=example,dc=org"

// ldapDirectoryData are the test's people and groups: alice (admins),
// victor (viewers), nora (no group); the service account cn=svc.
var ldapDirectoryData = `dn: dc=example,dc=org
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,dc=example,dc=org
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=example,dc=org
objectClass: organizationalUnit
ou: groups

dn: cn=svc,dc=example,dc=org
objectClass: inetOrgPerson
cn: svc
sn: svc
userPassword: svc-pw

dn: uid=alice,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: alice
cn: Alice Example
sn: Example
displayName: Alice Example
userPassword: alice-pw

dn: uid=victor,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: victor
cn: Victor Viewer
sn: Viewer
userPassword: victor-pw

dn: uid=nora,ou=people,dc=example,dc=org
objectClass: inetOrgPerson
uid: nora
cn: Nora Nogroup
sn: Nogroup
userPassword: nora-pw

dn: cn=llm-admins,ou=groups,dc=example,dc=org
objectClass: groupOfNames
cn: llm-admins
member: uid=alice,ou=people,dc=example,dc=org

dn: cn=llm-viewers,ou=groups,dc=example,dc=org
objectClass: groupOfNames
cn: llm-viewers
member: uid=victor,ou=people,dc=example,dc=org

dn: cn=unmapped,ou=groups,dc=example,dc=org
objectClass: groupOfNames
cn: unmapped
member: uid=nora,ou=people,dc=example,dc=org
`

// startSlapd starts slapd with the test's directory. Without slapd it
// skips, except in CI (CI=true), where .ci/install puts it there.
func startSlapd(t *testing.T) *slapdServer {
	t.Helper()
	slapd, err := exec.LookPath("slapd")
	if err != nil {
		slapd = "/usr/sbin/slapd"
	}
	ldapadd, err2 := exec.LookPath("ldapadd")
	if _, err := os.Stat(slapd); err != nil || err2 != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("slapd or ldapadd is not installed (Debian packages slapd and ldap-utils; .ci/install installs them)")
		}
		t.Skip("slapd or ldapadd is not installed (Debian packages slapd and ldap-utils)")
	}
	dir := t.TempDir()
	s := &slapdServer{ldap: freePort(t), ldaps: freePort(t), caFile: filepath.Join(dir, "cert.pem")}
	writeSelfSigned(t, s.caFile, filepath.Join(dir, "key.pem"))
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
moduleload memberof
pidfile %[1]s/slapd.pid
argsfile %[1]s/slapd.args
TLSCertificateFile %[1]s/cert.pem
TLSCertificateKeyFile %[1]s/key.pem
database mdb
maxsize 10485760
suffix "%[2]s"
rootdn "cn=admin,%[2]s"
rootpw root-pw
directory %[1]s/db
overlay memberof
access to attrs=userPassword by anonymous auth by self write by * none
access to * by users read by * none
`, dir, ldapSuffix)
	confFile := filepath.Join(dir, "slapd.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd := exec.Command(slapd, "-f", confFile, "-d", "0",
		"-h", fmt.Sprintf("ldap://127.0.0.1:%d/ ldaps://127.0.0.1:%d/", s.ldap, s.ldaps))
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("slapd logs:\n%s", logs.String())
		}
	})
	waitFor(t, 20*time.Second, "slapd to listen", func() bool {
		select {
		case <-exited:
			t.Fatalf("slapd exited at start:\n%s", logs.String())
		default:
		}
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.ldap))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	add := exec.Command(ldapadd, "-x", "-H", fmt.Sprintf("ldap://127.0.0.1:%d", s.ldap), "-D", "cn=admin,"+ldapSuffix, "-w", "root-pw")
	add.Stdin = strings.NewReader(ldapDirectoryData)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ldapadd: %v\n%s", err, out)
	}
	return s
}

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 and its
// key.
func writeSelfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ldapBlock is llm_admin's ldap block for the test directory: over
// LDAPS with groups from memberOf, or over StartTLS with a group search.
func ldapBlock(s *slapdServer, startTLS bool) string {
	conn := fmt.Sprintf("url ldaps://127.0.0.1:%d", s.ldaps)
	groups := "group_attribute memberOf"
	if startTLS {
		conn = fmt.Sprintf("url ldap://127.0.0.1:%d\n\t\t\t\tstarttls", s.ldap)
		groups = "group_base_dn ou=groups," + ldapSuffix + "\n\t\t\t\tgroup_filter (&(objectClass=groupOfNames)(member={dn}))"
	}
	return fmt.Sprintf(`			ldap {
				%s
				ca_file %s
				bind_dn cn=svc,%s
				bind_password {env.LLMGW_TEST_LDAP_PASSWORD}
				base_dn ou=people,%[3]s
				user_filter (uid={username})
				%s
				role admin cn=llm-admins,ou=groups,%[3]s
				role viewer cn=LLM-Viewers,ou=Groups,%[3]s
			}`, conn, s.caFile, ldapSuffix, groups)
}

func TestAdminSessionLDAP(t *testing.T) {
	s := startSlapd(t)
	t.Setenv("LLMGW_TEST_LDAP_PASSWORD", "svc-pw")
	storage := filepath.Join(t.TempDir(), "storage")
	g := sessionSite(t, storage, ldapBlock(s, false))

	code, _, body := siteCall(t, g, "", "GET", "/llm/auth/methods", "")
	if code != 200 || strings.TrimSpace(body) != `{"methods":["token","ldap"]}` {
		t.Errorf("methods: got %d %s", code, body)
	}
	// Each attempt from its own client address (trusted_proxies), so that
	// the per-username limit shows apart from the per-IP one.
	n := 0
	from := func() []string { n++; return []string{"X-Forwarded-For", fmt.Sprintf("10.0.0.%d", n)} }
	signIn := func(user, pw string) (int, signedIn, string) {
		code, si, body, _ := login(t, g, fmt.Sprintf(`{"method":"ldap","username":%q,"password":%q}`, user, pw), from()...)
		return code, si, body
	}

	// An admin by group, over LDAPS: its change is attributed to ldap:alice.
	code, alice, body := signIn("alice", "alice-pw")
	if code != 200 || alice.Identity != "ldap:alice" || alice.Role != "admin" || alice.Name != "Alice Example" {
		t.Fatalf("alice: got %d %+v %s", code, alice, body)
	}
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/stop", "", "Cookie", alice.cookie, "X-CSRF-Token", alice.CSRFToken)
	if code != 200 {
		t.Errorf("alice stopping a model: got %d %s", code, body)
	}
	waitFor(t, 5*time.Second, "the change attributed to ldap:alice in the audit log", func() bool {
		return strings.Contains(g.logs.String(), `"actor":"ldap:alice"`)
	})

	// A viewer by group (its DN in the config in another case) reads and
	// is refused a change.
	code, victor, body := signIn("victor", "victor-pw")
	if code != 200 || victor.Role != "viewer" {
		t.Fatalf("victor: got %d %+v %s", code, victor, body)
	}
	if code, _, body = siteCall(t, g, "", "GET", "/llm/models", "", "Cookie", victor.cookie); code != 200 {
		t.Errorf("victor reading: got %d %s", code, body)
	}
	code, _, body = siteCall(t, g, "", "POST", "/llm/models/sim-chat/start", "", "Cookie", victor.cookie, "X-CSRF-Token", victor.CSRFToken)
	if code != 403 || !strings.Contains(body, "ldap:victor has the viewer role") {
		t.Errorf("victor starting a model: got %d %s, want 403", code, body)
	}

	// A wrong password and an unknown user answer the same 401.
	code, _, wrong := signIn("alice", "guess")
	code2, _, unknown := signIn("mallory", "guess")
	if code != 401 || code2 != 401 || wrong != unknown {
		t.Errorf("wrong password: %d %s; unknown user: %d %s; want the same 401", code, wrong, code2, unknown)
	}
	// An empty password is an unauthenticated bind, which would succeed.
	if code, _, body = signIn("alice", ""); code != 401 {
		t.Errorf("empty password: got %d %s, want 401", code, body)
	}
	// A filter injected through the username finds no one.
	for _, u := range []string{"*)(uid=*", "*", "alice)(|(uid=*", `alice\2a`} {
		if code, _, body = signIn(u, "alice-pw"); code != 401 {
			t.Errorf("username %q: got %d %s, want 401", u, code, body)
		}
	}
	// The right password but no mapped group: 403 saying so.
	code, _, body = signIn("nora", "nora-pw")
	if code != 403 || !strings.Contains(body, `user \"nora\" is in no group mapped to a role`) {
		t.Errorf("nora: got %d %s, want 403", code, body)
	}

	// Failed sign-ins as one username, each from another address: after
	// max_failures (4), even the right password answers 429.
	for i := range 4 {
		if code, _, body = signIn("victor", fmt.Sprintf("guess-%d", i)); code != 401 {
			t.Fatalf("victor, wrong password %d: got %d %s", i+1, code, body)
		}
	}
	code, _, body, h := login(t, g, `{"method":"ldap","username":"victor","password":"victor-pw"}`, from()...)
	if code != 429 || h.Get("Retry-After") == "" {
		t.Errorf("victor after 4 failures: got %d %q %s, want 429 with Retry-After", code, h.Get("Retry-After"), body)
	}

	// StartTLS with groups found by a search; alice's session lives on
	// across the reload.
	g.reloadSession(storage, ldapBlock(s, true))
	if code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", alice.cookie); code != 200 || !strings.Contains(body, `"identity":"ldap:alice"`) {
		t.Errorf("alice's session after a reload: got %d %s", code, body)
	}
	code, alice2, body := signIn("alice", "alice-pw")
	if code != 200 || alice2.Role != "admin" || alice2.cookie == alice.cookie {
		t.Errorf("alice over StartTLS with a group search: got %d %+v %s", code, alice2, body)
	}
	if code, _, body = signIn("nora", "nora-pw"); code != 403 {
		t.Errorf("nora over StartTLS: got %d %s, want 403", code, body)
	}
	if strings.Contains(g.logs.String(), "alice-pw") || strings.Contains(g.logs.String(), "svc-pw") {
		t.Error("a password is in the log")
	}
}
