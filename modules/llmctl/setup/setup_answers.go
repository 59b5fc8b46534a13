package setup

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// setupAnswers is everything setup asks. It is kept, without secrets, in
// <dir>/setup.json, so that a re-run starts from the last answers and
// keeps the hashes of the admin token and the first key.
type setupAnswers struct {
	Dir    string `json:"dir"`
	Data   string `json:"data"`
	Listen string `json:"listen"`
	Admin  string `json:"admin"`
	Units  string `json:"units,omitempty"`
	User   string `json:"user"`
	Binary string `json:"binary"`

	Sim           bool     `json:"sim"`
	OllamaURL     string   `json:"ollama_url,omitempty"`
	OllamaModels  []string `json:"ollama_models,omitempty"`
	ProviderKind  string   `json:"provider_kind,omitempty"` // openai or anthropic; "" for none
	ProviderURL   string   `json:"provider_url,omitempty"`
	ProviderModel string   `json:"provider_model,omitempty"`
	ProviderKey   string   `json:"provider_key_env,omitempty"`

	Key     bool   `json:"key"`
	Tenant  string `json:"tenant,omitempty"` // org/team/project
	KeyID   string `json:"key_id,omitempty"`
	KeyHash string `json:"key_sha256,omitempty"`

	MirrorDir   string `json:"mirror_dir,omitempty"`
	S3Endpoint  string `json:"s3_endpoint,omitempty"`
	S3Bucket    string `json:"s3_bucket,omitempty"`
	S3Prefix    string `json:"s3_prefix,omitempty"`
	S3Region    string `json:"s3_region,omitempty"`
	S3TLS       bool   `json:"s3_tls,omitempty"`
	S3KeyEnv    string `json:"s3_access_key_env,omitempty"`
	S3SecretEnv string `json:"s3_secret_key_env,omitempty"`

	Redis       string   `json:"redis,omitempty"`    // redis://host:port/db
	Sentinels   []string `json:"sentinel,omitempty"` // host:port of each Sentinel
	Master      string   `json:"sentinel_master,omitempty"`
	RedisPwEnv  string   `json:"redis_password_env,omitempty"`
	ClusterName string   `json:"cluster_name,omitempty"`
	Node        string   `json:"node,omitempty"`
	Advertise   string   `json:"advertise,omitempty"`
	SecretEnv   string   `json:"cluster_secret_env,omitempty"`

	Console      bool   `json:"console"`
	TokenHash    string `json:"admin_token_sha256,omitempty"`
	OIDCIssuer   string `json:"oidc_issuer,omitempty"`
	OIDCClient   string `json:"oidc_client_id,omitempty"`
	OIDCSecret   string `json:"oidc_secret_env,omitempty"`
	OIDCAdmin    string `json:"oidc_admin_group,omitempty"`
	LDAPURL      string `json:"ldap_url,omitempty"`
	LDAPBaseDN   string `json:"ldap_base_dn,omitempty"`
	LDAPBindDN   string `json:"ldap_bind_dn,omitempty"`
	LDAPPassword string `json:"ldap_password_env,omitempty"`
	LDAPAdmin    string `json:"ldap_admin_group,omitempty"`

	rerun bool // read from an earlier run's setup.json
}

// defaultAnswers are the answers of a first run before any flag.
func defaultAnswers() setupAnswers {
	a := setupAnswers{Dir: "/etc/llmgw", Data: "/var/lib/llmgw", Listen: ":8080", Admin: "localhost:2019",
		User: "llmgw", Binary: "/usr/local/bin/llmgw", Sim: true, OllamaURL: "http://127.0.0.1:11434",
		Key: true, Tenant: "default/main/first", KeyID: "first", Console: true,
		S3KeyEnv: "S3_ACCESS_KEY", S3SecretEnv: "S3_SECRET_KEY", ClusterName: "llmgw", SecretEnv: "LLMGW_CLUSTER_SECRET",
		OIDCClient: "llmgw", OIDCAdmin: "llm-admins", LDAPPassword: "LDAP_BIND_PASSWORD"}
	if os.Geteuid() == 0 {
		a.Units = "/etc/systemd/system"
	}
	a.Node, _ = os.Hostname()
	return a
}

// statePath is where the answers are kept.
func (a *setupAnswers) statePath() string { return filepath.Join(a.Dir, "setup.json") }

// loadState reads the answers of an earlier run in dir; false when there
// are none.
func loadState(dir string) (setupAnswers, bool, error) {
	var a setupAnswers
	b, err := os.ReadFile(filepath.Join(dir, "setup.json"))
	if errors.Is(err, os.ErrNotExist) {
		return a, false, nil
	}
	if err != nil {
		return a, false, fmt.Errorf("reading the answers of the last setup: %w", err)
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return a, false, fmt.Errorf("reading %s: %w; remove it to start afresh", filepath.Join(dir, "setup.json"), err)
	}
	a.Dir, a.rerun = dir, true
	return a, true, nil
}

func (a *setupAnswers) state() []byte {
	b, _ := json.MarshalIndent(a, "", "  ")
	return append(b, '\n')
}

// cluster says whether this gateway is a node of a cluster.
func (a *setupAnswers) cluster() bool { return a.Redis != "" || len(a.Sentinels) > 0 }

// needsToken says whether the site serves the admin API, so an admin
// token is made.
func (a *setupAnswers) needsToken() bool { return a.Console }

// check finds the first answer that cannot work, saying how to fix it.
func (a *setupAnswers) check() error {
	checks := []func() error{
		func() error { return checkPaths(a) },
		func() error { return checkListen("--listen", a.Listen) },
		func() error { return checkHostPort("--admin", a.Admin) },
		func() error { return checkProvider(a) },
		func() error { return checkTenant(a) },
		func() error { return checkMirror(a) },
		func() error { return checkCluster(a) },
		func() error { return checkSignIn(a) },
	}
	for _, c := range checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

func checkPaths(a *setupAnswers) error {
	for _, p := range []struct{ flag, v string }{{"--dir", a.Dir}, {"--data", a.Data}, {"--bin", a.Binary}} {
		if !filepath.IsAbs(p.v) {
			return fmt.Errorf("%s %q: give an absolute path, such as /etc/llmgw", p.flag, p.v)
		}
	}
	if a.Units != "" && !filepath.IsAbs(a.Units) {
		return fmt.Errorf("--units %q: give an absolute directory, such as /etc/systemd/system, or \"\" for none", a.Units)
	}
	if a.Units != "" && a.User != "" {
		if err := catalog.CheckID("user", a.User); err != nil || strings.ContainsAny(a.User, "@$%{}\"'") {
			return fmt.Errorf("--user %q: give a plain system user name, such as llmgw", a.User)
		}
	}
	return nil
}

// checkListen checks a site address: :port, host:port, or a host name
// (served on 443 with a certificate Caddy obtains).
func checkListen(flag, v string) error {
	if v == "" || strings.ContainsAny(v, " \t{}/") {
		return fmt.Errorf("%s %q: give a port such as :8080, an address such as 127.0.0.1:8080, or a host name such as gw.example.com", flag, v)
	}
	if strings.Contains(v, ":") {
		return checkHostPort(flag, v)
	}
	return nil
}

func checkHostPort(flag, v string) error {
	_, port, err := net.SplitHostPort(v)
	if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%s %q: give host:port or :port, such as 127.0.0.1:8080, with a port from 1 to 65535", flag, v)
	}
	return nil
}

func checkEnvName(flag, v string) error {
	for i, r := range v {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("%s %q: give the name of an environment variable, such as OPENAI_API_KEY (the value goes in %s, never in the Caddyfile)", flag, v, "llmgw.env")
		}
	}
	if v == "" {
		return fmt.Errorf("%s: give the name of an environment variable", flag)
	}
	return nil
}

func checkProvider(a *setupAnswers) error {
	switch a.ProviderKind {
	case "":
		return nil
	case "openai", "anthropic":
	default:
		return fmt.Errorf("--provider %q: use openai (any OpenAI-compatible API) or anthropic", a.ProviderKind)
	}
	if u, err := url.Parse(a.ProviderURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--provider-url %q: give the provider's API root, such as https://api.openai.com/v1", a.ProviderURL)
	}
	if err := catalog.CheckName("model", a.ProviderModel); err != nil {
		return fmt.Errorf("--provider-model: %w", err)
	}
	return checkEnvName("--provider-key-env", a.ProviderKey)
}

func checkTenant(a *setupAnswers) error {
	if !a.Key {
		return nil
	}
	parts := strings.Split(a.Tenant, "/")
	if len(parts) != 3 {
		return fmt.Errorf("--tenant %q: give organisation/team/project, such as acme/research/alpha", a.Tenant)
	}
	for _, p := range append(parts, a.KeyID) {
		if err := catalog.CheckID("name", p); err != nil {
			return fmt.Errorf("--tenant %q, --key-id %q: %w", a.Tenant, a.KeyID, err)
		}
	}
	return nil
}

func checkMirror(a *setupAnswers) error {
	if a.MirrorDir != "" && !filepath.IsAbs(a.MirrorDir) {
		return fmt.Errorf("--mirror-dir %q: give an absolute directory, such as /srv/weights", a.MirrorDir)
	}
	if a.S3Endpoint == "" && a.S3Bucket == "" {
		return nil
	}
	if a.S3Bucket == "" || strings.Contains(a.S3Endpoint, "://") || checkHostPort("--s3-endpoint", a.S3Endpoint) != nil && !strings.Contains(a.S3Endpoint, ".") {
		return fmt.Errorf("an S3 store needs --s3-endpoint host[:port] (no scheme; --s3-tls for https) and --s3-bucket, got %q and %q", a.S3Endpoint, a.S3Bucket)
	}
	if err := checkEnvName("--s3-access-key-env", a.S3KeyEnv); err != nil {
		return err
	}
	return checkEnvName("--s3-secret-key-env", a.S3SecretEnv)
}

func checkCluster(a *setupAnswers) error {
	if !a.cluster() {
		return nil
	}
	if a.Redis != "" && len(a.Sentinels) > 0 {
		return fmt.Errorf("give --redis or --sentinel, not both")
	}
	if a.Redis != "" {
		if u, err := url.Parse(a.Redis); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
			return fmt.Errorf("--redis %q: give a URL such as redis://10.0.0.5:6379/0", a.Redis)
		}
	}
	for _, s := range a.Sentinels {
		if err := checkHostPort("--sentinel", s); err != nil {
			return err
		}
	}
	if len(a.Sentinels) > 0 && a.Master == "" {
		return fmt.Errorf("--sentinel needs --sentinel-master, the name the Sentinels monitor, such as mymaster")
	}
	if err := catalog.CheckID("node", a.Node); err != nil {
		return fmt.Errorf("--node: %w", err)
	}
	if err := catalog.CheckID("cluster", a.ClusterName); err != nil {
		return fmt.Errorf("--cluster-name: %w", err)
	}
	if err := checkHostPort("--advertise", a.Advertise); err != nil {
		return fmt.Errorf("%w (where the other nodes reach this one, such as 10.0.0.11:7443)", err)
	}
	if a.RedisPwEnv != "" {
		if err := checkEnvName("--redis-password-env", a.RedisPwEnv); err != nil {
			return err
		}
	}
	return checkEnvName("--cluster-secret-env", a.SecretEnv)
}

func checkSignIn(a *setupAnswers) error {
	if !a.Console && (a.OIDCIssuer != "" || a.LDAPURL != "") {
		return fmt.Errorf("OIDC and LDAP sign-in are the console's: leave out --console=false")
	}
	if a.OIDCIssuer != "" {
		if u, err := url.Parse(a.OIDCIssuer); err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
			return fmt.Errorf("--oidc-issuer %q: give the provider's issuer URL, such as https://login.example.com/realms/staff", a.OIDCIssuer)
		}
		if a.OIDCClient == "" || a.OIDCAdmin == "" {
			return fmt.Errorf("--oidc-issuer needs --oidc-client-id and --oidc-admin-group")
		}
		if a.OIDCSecret != "" {
			if err := checkEnvName("--oidc-secret-env", a.OIDCSecret); err != nil {
				return err
			}
		}
	}
	if a.LDAPURL == "" {
		return nil
	}
	if u, err := url.Parse(a.LDAPURL); err != nil || u.Scheme != "ldap" && u.Scheme != "ldaps" || u.Host == "" {
		return fmt.Errorf("--ldap-url %q: use ldaps://host:636 or ldap://host:389", a.LDAPURL)
	}
	if a.LDAPBaseDN == "" || !strings.Contains(a.LDAPAdmin, "=") {
		return fmt.Errorf("--ldap-url needs --ldap-base-dn (such as ou=people,dc=example,dc=com) and --ldap-admin-group (a group's DN, such as cn=llm-admins,ou=groups,dc=example,dc=com)")
	}
	if a.LDAPBindDN != "" {
		return checkEnvName("--ldap-password-env", a.LDAPPassword)
	}
	return nil
}
