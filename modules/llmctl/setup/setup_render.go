package setup

import (
	"bytes"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// setupFiles are the templates setup writes from: the binary carries
// them, so setup works from a release's binary alone.
//
//go:embed setupfiles/*.tmpl
var setupFiles embed.FS

var setupTemplates = template.Must(template.New("").Funcs(template.FuncMap{"q": caddyQuote}).ParseFS(setupFiles, "setupfiles/*.tmpl"))

// caddyQuote quotes a Caddyfile token when it holds what would split it.
func caddyQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\"'`{}#\n") {
		return s
	}
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// setupFile is one file setup writes.
type setupFile struct {
	Path    string
	Content []byte
	Mode    os.FileMode
	Secret  bool // its values are not shown in a diff
}

// caddyfileData is what Caddyfile.tmpl reads.
type caddyfileData struct {
	*setupAnswers
	Unit, OllamaBase, Org, Team, Project, QuotaStore, Site string
	Cluster, Mirror                                        bool
}

// renderCaddyfile is the Caddyfile for the answers.
func renderCaddyfile(a *setupAnswers) ([]byte, error) {
	d := caddyfileData{setupAnswers: a, Unit: a.unitName(true), Cluster: a.cluster(), Site: siteAddress(a.Listen),
		Mirror:     a.MirrorDir != "" || a.S3Bucket != "",
		OllamaBase: strings.TrimSuffix(a.OllamaURL, "/") + "/v1"}
	if p := strings.Split(a.Tenant, "/"); len(p) == 3 {
		d.Org, d.Team, d.Project = p[0], p[1], p[2]
	}
	d.QuotaStore = a.Redis
	if a.RedisPwEnv != "" {
		d.QuotaStore = "" // its URL would carry the password into the config and logs
	} else if len(a.Sentinels) > 0 {
		d.QuotaStore = "redis://" + a.Sentinels[0] + "?master_name=" + a.Master
		for _, s := range a.Sentinels[1:] {
			d.QuotaStore += "&addr=" + s
		}
	}
	var b bytes.Buffer
	if err := setupTemplates.ExecuteTemplate(&b, "Caddyfile.tmpl", d); err != nil {
		return nil, fmt.Errorf("writing the Caddyfile: %w", err)
	}
	return b.Bytes(), nil
}

// siteAddress is the Caddyfile's site address for --listen: a port or
// an address with one is plain HTTP (Caddy would otherwise serve HTTPS on
// an IP address with its own CA), a host name HTTPS.
func siteAddress(listen string) string {
	if strings.HasPrefix(listen, ":") || !strings.Contains(listen, ":") {
		return listen
	}
	return "http://" + listen
}

// unitName is the systemd unit setup writes: llmgw.service, or for a
// node of a cluster the template llmgw-node@.service (instance: true
// gives the instance for this node).
func (a *setupAnswers) unitName(instance bool) string {
	switch {
	case !a.cluster():
		return "llmgw.service"
	case instance:
		return "llmgw-node@" + a.Node + ".service"
	}
	return "llmgw-node@.service"
}

// unitData is what llmgw.service.tmpl reads.
type unitData struct {
	Name, NodeExample, User, Groups, DataHome, Data, Dir, Binary, StateDir string
	Node                                                                   bool
	Writable                                                               []string
}

// renderUnit is the service unit for the answers; groups are the GPU
// device groups this machine has (gpuGroups).
func renderUnit(a *setupAnswers, groups []string) ([]byte, error) {
	d := unitData{Name: a.unitName(false), NodeExample: a.Node, User: a.User, Groups: strings.Join(groups, " "),
		DataHome: a.Data, Data: a.Data, Dir: a.Dir, Binary: a.Binary, Node: a.cluster()}
	if rel, ok := strings.CutPrefix(a.Data, "/var/lib/"); ok && rel != "" {
		d.StateDir = rel
	}
	if a.MirrorDir != "" {
		d.Writable = append(d.Writable, a.MirrorDir)
	}
	var b bytes.Buffer
	if err := setupTemplates.ExecuteTemplate(&b, "llmgw.service.tmpl", d); err != nil {
		return nil, fmt.Errorf("writing %s: %w", d.Name, err)
	}
	return b.Bytes(), nil
}

// gpuGroups are the groups of video and render devices that exist here
// (a unit naming a group that does not exist fails to start).
func gpuGroups(groupFile string) []string {
	b, err := os.ReadFile(groupFile)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		name, _, _ := strings.Cut(l, ":")
		if name == "video" || name == "render" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// envVar is one variable of llmgw.env the answers need.
type envVar struct {
	Name, Why, Value string // Value set: written, else a commented line to fill in
}

// neededEnv are the variables the Caddyfile reads, with what each is for.
func neededEnv(a *setupAnswers, clusterSecret string) []envVar {
	var vs []envVar
	if a.ProviderKind != "" {
		vs = append(vs, envVar{Name: a.ProviderKey, Why: "the API key of " + a.ProviderURL})
	}
	if a.S3Bucket != "" {
		vs = append(vs, envVar{Name: a.S3KeyEnv, Why: "the S3 store's access key"}, envVar{Name: a.S3SecretEnv, Why: "the S3 store's secret key"})
	}
	if a.cluster() {
		if a.RedisPwEnv != "" {
			vs = append(vs, envVar{Name: a.RedisPwEnv, Why: "the password of Redis (and the Sentinels)"})
		}
		vs = append(vs, envVar{Name: a.SecretEnv, Why: "the cluster secret: the same on every node", Value: clusterSecret})
	}
	if a.OIDCSecret != "" {
		vs = append(vs, envVar{Name: a.OIDCSecret, Why: "the OpenID Connect client's secret"})
	}
	if a.LDAPBindDN != "" {
		vs = append(vs, envVar{Name: a.LDAPPassword, Why: "the password of " + a.LDAPBindDN})
	}
	return vs
}

// renderEnv is llmgw.env: what was there stays (values an operator
// filled in), and each variable the answers need and it lacks is added,
// with its value when setup has one, else as a commented line to fill in.
func renderEnv(old []byte, vars []envVar) []byte {
	var b bytes.Buffer
	if len(old) == 0 {
		b.WriteString("# The environment of llmgw's service (systemd's EnvironmentFile=): the secrets\n" +
			"# its Caddyfile reads as {env.NAME}. Keep this file mode 0600, owned by root.\n")
	} else {
		b.Write(old)
		if !bytes.HasSuffix(old, []byte("\n")) {
			b.WriteByte('\n')
		}
	}
	for _, v := range vars {
		if envHas(old, v.Name) {
			continue
		}
		fmt.Fprintf(&b, "# %s: %s\n", v.Name, v.Why)
		if v.Value != "" {
			fmt.Fprintf(&b, "%s=%s\n", v.Name, v.Value)
		} else {
			fmt.Fprintf(&b, "#%s=\n", v.Name)
		}
	}
	return b.Bytes()
}

// envHas says whether an env file sets NAME, or has the commented line
// setup writes for it.
func envHas(env []byte, name string) bool {
	_, ok := envValue(env, name)
	return ok || bytes.Contains(env, []byte("\n#"+name+"=")) || bytes.HasPrefix(env, []byte("#"+name+"="))
}

// envValue is NAME's value in an env file.
func envValue(env []byte, name string) (string, bool) {
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+"="); ok {
			return strings.Trim(v, `"'`), true
		}
	}
	return "", false
}

// secrets are the admin token and the first key made by this run, shown
// once; empty when an earlier run's are kept.
type secrets struct {
	Token, Key string
}

// makeSecrets makes what the answers need and an earlier run has not
// made, keeping only their hashes in the answers.
func makeSecrets(a *setupAnswers) (secrets, error) {
	var s secrets
	var err error
	if a.needsToken() && a.TokenHash == "" {
		if s.Token, err = tenancy.NewSecret(); err != nil {
			return s, fmt.Errorf("making the admin token: %w", err)
		}
		a.TokenHash = tenancy.HashKey(s.Token)
	}
	if a.Key && a.KeyHash == "" {
		if s.Key, err = tenancy.NewSecret(); err != nil {
			return s, fmt.Errorf("making the first key: %w", err)
		}
		a.KeyHash = tenancy.HashKey(s.Key)
	}
	return s, nil
}

// clusterSecret is the cluster secret: the one llmgw.env holds, else the
// one in setup's own environment (to join a cluster made elsewhere), else
// a new one.
func clusterSecret(a *setupAnswers, env []byte) (string, error) {
	if !a.cluster() {
		return "", nil
	}
	if v, ok := envValue(env, a.SecretEnv); ok && v != "" {
		return v, nil
	}
	if v := os.Getenv(a.SecretEnv); v != "" {
		if len(v) < 32 {
			return "", fmt.Errorf("$%s is %d characters; a cluster secret needs 32 or more (openssl rand -hex 32)", a.SecretEnv, len(v))
		}
		return v, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("making the cluster secret: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// plan is every file the answers need, in the order they are written.
func plan(a *setupAnswers) ([]setupFile, error) {
	caddyfile, err := renderCaddyfile(a)
	if err != nil {
		return nil, err
	}
	envPath := filepath.Join(a.Dir, "llmgw.env")
	old, _ := os.ReadFile(envPath)
	secret, err := clusterSecret(a, old)
	if err != nil {
		return nil, err
	}
	files := []setupFile{
		{Path: filepath.Join(a.Dir, "Caddyfile"), Content: caddyfile, Mode: 0o644},
		{Path: envPath, Content: renderEnv(old, neededEnv(a, secret)), Mode: 0o600, Secret: true},
	}
	if a.Units != "" {
		unit, err := renderUnit(a, gpuGroups("/etc/group"))
		if err != nil {
			return nil, err
		}
		files = append(files, setupFile{Path: filepath.Join(a.Units, a.unitName(false)), Content: unit, Mode: 0o644})
	}
	return append(files, setupFile{Path: a.statePath(), Content: a.state(), Mode: 0o600}), nil
}
