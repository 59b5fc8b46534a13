package setup

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

const setupLong = `Sets up llmgw on this machine: it looks at the machine (CPU cores,
memory, GPUs, engines on PATH, a local Ollama server), asks what to serve
and writes a Caddyfile, the environment file of its secrets and a systemd
unit. On a terminal it asks, explaining each part; every question has a
flag, and with --yes (or when standard input is not a terminal) it asks
nothing and takes the flags and defaults.

It writes, in --dir (default /etc/llmgw): Caddyfile, llmgw.env (mode 0600:
the secrets the Caddyfile reads as {env.NAME}; setup only adds commented
lines to fill in, and the cluster secret) and setup.json (the answers, so
that a re-run starts from them); in --units (default /etc/systemd/system
as root): llmgw.service, or llmgw-node@.service for a node of a cluster.
The admin token and the first API key are made and printed once; only
their SHA-256 is kept. Credentials are asked only as the names of
environment variables, never written into the Caddyfile.

Run again, it shows what it would change, file by file and line by line,
and changes nothing without confirmation (--yes in scripts); the same
answers change nothing, and existing secrets are kept. With --enable it
creates the service user, installs this binary as --bin when it is
missing, and enables and (re)starts the unit.`

const setupExample = `  $ sudo llmgw setup
  $ sudo llmgw setup --yes --models sim --enable
  $ llmgw setup --yes --dir ./gw --data ./gw/data --units "" --listen 127.0.0.1:8080
  $ sudo llmgw setup --yes --models ollama,sim --provider openai --provider-key-env OPENAI_API_KEY
  $ sudo llmgw setup --yes --sentinel 10.0.0.5:26379,10.0.0.6:26379 --sentinel-master mymaster \
      --node gpu-1 --advertise 10.0.0.11:7443 --s3-endpoint s3.internal:9000 --s3-bucket weights
  $ sudo llmgw setup --yes --oidc-issuer https://login.example.com/realms/staff --oidc-admin-group llm-admins`

// setupRun is one run of "llmgw setup".
type setupRun struct {
	flags    setupAnswers // what the flags say (their defaults unless given)
	models   []string
	yes      bool
	enable   bool
	newToken bool
	newKey   bool
	cmd      *cobra.Command
	in       io.Reader
	out      io.Writer
}

// Command is "llmgw setup".
func Command() *cobra.Command {
	r := &setupRun{flags: defaultAnswers()}
	cmd := &cobra.Command{Use: "setup", Short: "Sets up llmgw on this machine: config, secrets and a systemd unit, asking or from flags",
		Long: setupLong, Example: setupExample, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r.cmd, r.in, r.out = cmd, cmd.InOrStdin(), cmd.OutOrStdout()
			return r.run(cmd.Context())
		}}
	r.bindFlags(cmd)
	return cmd
}

// flagFields names the answer each flag sets.
var flagFields = map[string]string{
	"dir": "Dir", "data": "Data", "listen": "Listen", "admin": "Admin", "units": "Units", "user": "User", "bin": "Binary",
	"ollama-url": "OllamaURL", "ollama-models": "OllamaModels", "provider": "ProviderKind", "provider-url": "ProviderURL",
	"provider-model": "ProviderModel", "provider-key-env": "ProviderKey", "key": "Key", "tenant": "Tenant", "key-id": "KeyID",
	"mirror-dir": "MirrorDir", "s3-endpoint": "S3Endpoint", "s3-bucket": "S3Bucket", "s3-prefix": "S3Prefix", "s3-region": "S3Region",
	"s3-tls": "S3TLS", "s3-access-key-env": "S3KeyEnv", "s3-secret-key-env": "S3SecretEnv", "redis": "Redis", "sentinel": "Sentinels",
	"sentinel-master": "Master", "redis-password-env": "RedisPwEnv", "cluster-name": "ClusterName", "node": "Node", "advertise": "Advertise",
	"cluster-secret-env": "SecretEnv", "console": "Console", "oidc-issuer": "OIDCIssuer", "oidc-client-id": "OIDCClient",
	"oidc-secret-env": "OIDCSecret", "oidc-admin-group": "OIDCAdmin", "ldap-url": "LDAPURL", "ldap-base-dn": "LDAPBaseDN",
	"ldap-bind-dn": "LDAPBindDN", "ldap-password-env": "LDAPPassword", "ldap-admin-group": "LDAPAdmin",
}

func (r *setupRun) bindFlags(cmd *cobra.Command) {
	f, a := cmd.Flags(), &r.flags
	f.StringVar(&a.Dir, "dir", a.Dir, "the directory of the Caddyfile, llmgw.env and setup.json")
	f.StringVar(&a.Data, "data", a.Data, "the data directory (storage, runtime keys, the node cache of weights)")
	f.StringVar(&a.Listen, "listen", a.Listen, "the site's address: :8080, 127.0.0.1:8080, or a host name for HTTPS")
	f.StringVar(&a.Admin, "admin", a.Admin, "the local admin endpoint (llmgw ctl, reload)")
	f.StringVar(&a.Units, "units", a.Units, `where the systemd unit goes ("" for none; as root the default is /etc/systemd/system)`)
	f.StringVar(&a.User, "user", a.User, "the user the service runs as")
	f.StringVar(&a.Binary, "bin", a.Binary, "the llmgw binary the unit runs")
	f.StringSliceVar(&r.models, "models", []string{"sim"}, "what to serve: sim, ollama (every model of the local Ollama server), none")
	f.StringVar(&a.OllamaURL, "ollama-url", a.OllamaURL, "where an Ollama server answers")
	f.StringSliceVar(&a.OllamaModels, "ollama-models", nil, "the Ollama models to serve (default with --models ollama: all)")
	f.StringVar(&a.ProviderKind, "provider", "", "an outside provider: openai (any OpenAI-compatible API) or anthropic")
	f.StringVar(&a.ProviderURL, "provider-url", "", "its API root (default: OpenAI's or Anthropic's)")
	f.StringVar(&a.ProviderModel, "provider-model", "", "its model to serve (default gpt-4o-mini, claude-sonnet-4-5)")
	f.StringVar(&a.ProviderKey, "provider-key-env", "", "the environment variable of its API key (default OPENAI_API_KEY, ANTHROPIC_API_KEY)")
	f.BoolVar(&a.Key, "key", a.Key, "make a first API key (--key=false: no keys, anyone may call)")
	f.StringVar(&a.Tenant, "tenant", a.Tenant, "the first key's organisation/team/project")
	f.StringVar(&a.KeyID, "key-id", a.KeyID, "the first key's id")
	r.bindMoreFlags(cmd)
}

func (r *setupRun) bindMoreFlags(cmd *cobra.Command) {
	f, a := cmd.Flags(), &r.flags
	f.StringVar(&a.MirrorDir, "mirror-dir", "", "a directory store of the weights mirror")
	f.StringVar(&a.S3Endpoint, "s3-endpoint", "", "an S3 store of the mirror: its host[:port]")
	f.StringVar(&a.S3Bucket, "s3-bucket", "", "the S3 store's bucket")
	f.StringVar(&a.S3Prefix, "s3-prefix", "", "a prefix for the S3 store's objects")
	f.StringVar(&a.S3Region, "s3-region", "", "the S3 store's region")
	f.BoolVar(&a.S3TLS, "s3-tls", false, "reach the S3 store over HTTPS")
	f.StringVar(&a.S3KeyEnv, "s3-access-key-env", a.S3KeyEnv, "the environment variable of the S3 access key")
	f.StringVar(&a.S3SecretEnv, "s3-secret-key-env", a.S3SecretEnv, "the environment variable of the S3 secret key")
	f.StringVar(&a.Redis, "redis", "", "a cluster's Redis: redis://host:port/db (this machine becomes a node)")
	f.StringSliceVar(&a.Sentinels, "sentinel", nil, "a cluster's Sentinels: host:port,host:port (instead of --redis)")
	f.StringVar(&a.Master, "sentinel-master", "", "the name the Sentinels monitor")
	f.StringVar(&a.RedisPwEnv, "redis-password-env", "", "the environment variable of Redis's password")
	f.StringVar(&a.ClusterName, "cluster-name", a.ClusterName, "the cluster's name (keys in Redis start with llmgw:<name>:)")
	f.StringVar(&a.Node, "node", a.Node, "this node's name")
	f.StringVar(&a.Advertise, "advertise", "", "where the other nodes reach this one, host:port (default: this machine's address, port 7443)")
	f.StringVar(&a.SecretEnv, "cluster-secret-env", a.SecretEnv, "the environment variable of the cluster secret (made when llmgw.env lacks it)")
	f.BoolVar(&a.Console, "console", a.Console, "serve the web console and the admin API on the site")
	f.StringVar(&a.OIDCIssuer, "oidc-issuer", "", "sign-in through this OpenID Connect provider")
	f.StringVar(&a.OIDCClient, "oidc-client-id", a.OIDCClient, "llmgw's client id at the provider")
	f.StringVar(&a.OIDCSecret, "oidc-secret-env", "", "the environment variable of the client secret (none: a public client)")
	f.StringVar(&a.OIDCAdmin, "oidc-admin-group", a.OIDCAdmin, "the groups claim value that makes an admin")
	f.StringVar(&a.LDAPURL, "ldap-url", "", "sign-in against this LDAP directory: ldaps://host:636")
	f.StringVar(&a.LDAPBaseDN, "ldap-base-dn", "", "where to search for people")
	f.StringVar(&a.LDAPBindDN, "ldap-bind-dn", "", "the DN to search as (default: anonymous)")
	f.StringVar(&a.LDAPPassword, "ldap-password-env", a.LDAPPassword, "the environment variable of the bind DN's password")
	f.StringVar(&a.LDAPAdmin, "ldap-admin-group", "", "the DN of the group whose members are admins")
	f.BoolVarP(&r.yes, "yes", "y", false, "ask nothing; write the changes without confirmation")
	f.BoolVar(&r.enable, "enable", false, "create the user, install the binary, enable and (re)start the unit (as root)")
	f.BoolVar(&r.newToken, "new-admin-token", false, "make a new admin token instead of keeping the last one")
	f.BoolVar(&r.newKey, "new-key", false, "make a new first key instead of keeping the last one")
}

// given says whether any of the named flags was given.
func (r *setupRun) given(names ...string) bool {
	return slices.ContainsFunc(names, r.cmd.Flags().Changed)
}

// answers are the last run's answers (or the defaults) with the flags
// given laid over them.
func (r *setupRun) answers() (setupAnswers, bool, error) {
	dir, err := filepath.Abs(r.flags.Dir)
	if err != nil {
		return setupAnswers{}, false, fmt.Errorf("setup: --dir %q: %w", r.flags.Dir, err)
	}
	a, found, err := loadState(dir)
	if err != nil {
		return a, false, err
	}
	if !found {
		a = defaultAnswers()
		a.Dir = dir
	}
	dst, src := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&r.flags).Elem()
	for flag, field := range flagFields {
		if r.given(flag) {
			dst.FieldByName(field).Set(src.FieldByName(field))
		}
	}
	for _, p := range []*string{&a.Dir, &a.Data, &a.Units, &a.Binary, &a.MirrorDir} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p, _ = filepath.Abs(*p) // the unit and the Caddyfile need absolute paths
		}
	}
	if r.newToken {
		a.TokenHash = ""
	}
	if r.newKey {
		a.KeyHash = "" // a new --tenant or --key-id moves the same key
	}
	return a, found, nil
}

// interactive says whether to ask: on a terminal, without --yes.
func (r *setupRun) interactive() bool {
	f, ok := r.in.(*os.File)
	return !r.yes && ok && term.IsTerminal(int(f.Fd()))
}

func (r *setupRun) run(ctx context.Context) error {
	a, rerun, err := r.answers()
	if err != nil {
		return err
	}
	m := detectMachine(ctx, a.OllamaURL)
	m.print(r.out, a.OllamaURL)
	if err := r.applyModels(&a, m); err != nil {
		return err
	}
	var p *prompter
	if r.interactive() {
		p = &prompter{in: bufio.NewReader(r.in), out: r.out}
		if rerun {
			fmt.Fprintf(r.out, "\nThe answers of the last setup (%s) are the defaults: Enter keeps each.\n", a.statePath())
		}
		if err := interview(p, &a, m, r.given); err != nil {
			return err
		}
	}
	if a.cluster() && a.Advertise == "" {
		a.Advertise = defaultAdvertise()
	}
	if err := a.check(); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return r.write(&a, p)
}

// applyModels reads --models (sim, ollama, none) into the answers.
func (r *setupRun) applyModels(a *setupAnswers, m machine) error {
	if a.ProviderKind != "" {
		providerDefaults(a)
	}
	if !r.given("models") {
		return nil
	}
	a.Sim, a.OllamaModels = false, nil
	for _, v := range r.models {
		switch strings.TrimSpace(v) {
		case "sim":
			a.Sim = true
		case "ollama":
			if !m.Ollama {
				return fmt.Errorf("setup: --models ollama: no Ollama server answers at %s; start it (ollama serve) or give --ollama-url", a.OllamaURL)
			}
			a.OllamaModels = m.OllamaModels
			if r.given("ollama-models") {
				a.OllamaModels = r.flags.OllamaModels
			}
		case "none", "":
		default:
			return fmt.Errorf("setup: --models %q: use sim, ollama or none (an outside provider: --provider)", v)
		}
	}
	return nil
}
