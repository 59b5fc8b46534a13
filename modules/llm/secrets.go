package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/internal/egress"
	"github.com/llmgw/llmgw/modules/llm/catalog"

	"github.com/llmgw/llmgw/mirror"
)

// Values the admin API takes at run time are taken as they are: what a
// caller can make llmgw read (its environment, its files) is the config
// file's decision. A placeholder such as {env.NAME} or {file.path} is
// resolved only in the config file; at run time a secret is given as
// the value itself (never shown back), or as secret:NAME, naming a
// secret the config file declares:
//
//	llm {
//		secret openai_key {env.OPENAI_API_KEY}
//	}
//
// and then "api_key": "secret:openai_key" in a model added at run time.

// secretRef is the prefix of a value that names a declared secret.
const secretRef = "secret:"

// placeholder finds a Caddy global placeholder ({env.X}, {file./p},
// {system.hostname}, {time.now}) in a value; an engine template's
// "{{ .Prompt }}" is not one.
var placeholder = regexp.MustCompile(`\{[a-z_]+\.[^{}\s]*\}`)

// errRuntimePlaceholder is the error of a value given at run time that
// holds a placeholder.
var errRuntimePlaceholder = fmt.Errorf("placeholders such as {env.NAME} and {file.path} are resolved only in the config file; at run time give the value itself, or secret:NAME for a secret the config file declares (llm { secret NAME <value> })")

// parseSecret parses "secret <name> <value>" in the llm block.
func (a *App) parseSecret(d *caddyfile.Dispenser) error {
	var name, value string
	if !d.Args(&name, &value) || d.NextArg() {
		return d.ArgErr()
	}
	if err := checkSecretName(name); err != nil {
		return d.Err(err.Error())
	}
	if _, dup := a.Secrets[name]; dup {
		return d.Errf("secret %q is declared twice", name)
	}
	if a.Secrets == nil {
		a.Secrets = map[string]string{}
	}
	a.Secrets[name] = value
	return nil
}

func checkSecretName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("secret name %q: use 1 to 64 letters, digits, '-' and '_'", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("secret name %q: use 1 to 64 letters, digits, '-' and '_'", name)
		}
	}
	return nil
}

// provisionSecrets resolves the declared secrets' placeholders and makes
// the policy of URLs set at run time.
func (a *App) provisionSecrets() error {
	repl := caddy.NewReplacer()
	a.secrets = make(map[string]string, len(a.Secrets))
	for name, v := range a.Secrets {
		if err := checkSecretName(name); err != nil {
			return err
		}
		a.secrets[name] = repl.ReplaceKnown(v, "")
	}
	p, err := egress.New(a.RuntimeHosts, "llm { runtime_hosts <host or range> }")
	if err != nil {
		return fmt.Errorf("runtime_hosts: %w", err)
	}
	a.egress = p
	return nil
}

// Secret returns the value of a secret the config file declares.
func (a *App) Secret(name string) (string, bool) {
	if a == nil {
		return "", false
	}
	v, ok := a.secrets[name]
	return v, ok
}

// RuntimeValue is what a value given through the admin API stands for:
// the value itself, or the declared secret that secret:NAME names. A
// value with a placeholder is refused: see errRuntimePlaceholder.
func (a *App) RuntimeValue(v string) (string, error) {
	if name, ok := strings.CutPrefix(v, secretRef); ok {
		s, found := a.Secret(name)
		if !found {
			return "", fmt.Errorf("%s names no secret the config file declares; declare it with llm { secret %s <value> }", v, name)
		}
		return s, nil
	}
	if placeholder.MatchString(v) {
		return "", errRuntimePlaceholder
	}
	return v, nil
}

// FileValue is what a value from the config file stands for: its
// placeholders resolved, or the declared secret that secret:NAME names.
func (a *App) FileValue(repl *caddy.Replacer, v string) (string, error) {
	if strings.HasPrefix(v, secretRef) {
		return a.RuntimeValue(v)
	}
	return repl.ReplaceKnown(v, ""), nil
}

// Egress is the policy of URLs set at run time (see package egress).
func (a *App) Egress() *egress.Policy {
	if a == nil || a.egress == nil {
		p, _ := egress.New(nil, "llm { runtime_hosts <host or range> }")
		return p
	}
	return a.egress
}

// Masked is how a secret given at run time is shown back: never its
// value, only a fingerprint that tells two values apart.
func Masked(v string) string {
	if v == "" || strings.HasPrefix(v, secretRef) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "*** sha256:" + hex.EncodeToString(sum[:4])
}

// secretOption says whether an engine option holds a credential, to be
// masked wherever it is shown (the audit log).
func secretOption(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"key", "token", "secret", "password", "auth", "credential"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// maskOptions returns opts with credentials masked.
func maskOptions(opts map[string]string) map[string]string {
	if opts == nil {
		return nil
	}
	out := maps.Clone(opts)
	for k, v := range out {
		if secretOption(k) {
			out[k] = Masked(v)
		}
	}
	return out
}

// resolveModel resolves m's source and options for its engine: values
// from the config file with their placeholders, values given at run time
// as they are (see RuntimeValue). It writes m only when m is not yet
// published or its values changed.
func (a *App) resolveModel(repl *caddy.Replacer, m *catalog.Model) error {
	if r := m.EngineVals; r != nil && r.GivenSource == m.Source && maps.Equal(r.GivenOptions, m.Options) {
		return nil
	}
	ev := &catalog.EngineValues{GivenSource: m.Source, GivenOptions: maps.Clone(m.Options), Options: make(map[string]string, len(m.Options))}
	var err error
	if ev.Source, err = a.modelValue(repl, m, "source", m.Source, m.FileVals != nil && m.FileVals.Source == m.Source); err != nil {
		return err
	}
	for k, v := range m.Options {
		fromFile := m.FileVals != nil && m.FileVals.Options[k] == v
		if ev.Options[k], err = a.modelValue(repl, m, "option "+k, v, fromFile); err != nil {
			return err
		}
	}
	m.EngineVals = ev
	return nil
}

func (a *App) modelValue(repl *caddy.Replacer, m *catalog.Model, what, v string, fromFile bool) (string, error) {
	if fromFile {
		s, err := a.FileValue(repl, v)
		if err != nil {
			return "", fmt.Errorf("model %q: %s: %w", m.Name, what, err)
		}
		return s, nil
	}
	s, err := a.RuntimeValue(v)
	if err != nil {
		return "", fmt.Errorf("model %q: %s: %w", m.Name, what, err)
	}
	return s, nil
}

// markFileValues records the config models' values as the file gives
// them, before stored settings lay over them.
func markFileValues(models []*catalog.Model) {
	for _, m := range models {
		m.FileVals = &catalog.FileValues{Source: m.Source, Options: maps.Clone(m.Options)}
	}
}

// checkRuntimeModel checks the values a request gives a model (m, when
// it adds one; opts, its options): no placeholders, secret references to
// declared secrets, and URLs (a source, a base_url) that the egress
// policy allows. It answers 400 saying which value and why.
func (a *App) checkRuntimeModel(ctx context.Context, m *catalog.Model, opts map[string]string, adapters []*catalog.Adapter) error {
	name := "the model"
	if m != nil {
		name = fmt.Sprintf("model %q", m.Name)
		if err := a.checkRuntimeValue(ctx, "source", m.Source, true); err != nil {
			return apiErr(http.StatusBadRequest, "%s: %v", name, err)
		}
	}
	for _, ad := range adapters {
		if err := a.checkRuntimeValue(ctx, "adapter "+catalog.BoundedLog(ad.Name)+": source", ad.Source, true); err != nil {
			return apiErr(http.StatusBadRequest, "%s: %v", name, err)
		}
	}
	for k, v := range opts {
		if err := a.checkRuntimeValue(ctx, "option "+k, v, k == "base_url"); err != nil {
			return apiErr(http.StatusBadRequest, "%s: %v", name, err)
		}
	}
	return nil
}

func (a *App) checkRuntimeValue(ctx context.Context, what, v string, isURL bool) error {
	s, err := a.RuntimeValue(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if isURL && (strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://")) {
		if _, err := a.Egress().CheckURL(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// mirrorSourceContext checks a source given to POST /llm/mirror/versions
// and returns the context to fetch it with. A URL source must be one the
// egress policy allows, and is fetched with a client that checks every
// connection and redirect; a local path is read from this machine's
// disks, which only the host's owner may name (the admin role, or Caddy's
// own admin endpoint); a registry (hf://) source is the config's
// registry's.
func (a *App) mirrorSourceContext(r *http.Request, src string) (context.Context, error) {
	ctx := r.Context()
	switch {
	case strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://"):
		if _, err := a.Egress().CheckURL(ctx, src); err != nil {
			return nil, apiErr(http.StatusBadRequest, "source: %v", err)
		}
		return mirror.WithHTTPClient(ctx, a.Egress().Client(0)), nil
	case strings.Contains(src, "://"):
		return ctx, nil
	case !HostOwner(ctx):
		c, _ := CallerOf(ctx)
		return nil, apiErr(http.StatusForbidden, "%s has the %s role; a source on this machine's disks (%s) needs the admin role: an operator may add versions from http(s) or hf:// sources", c.Actor, c.Role, catalog.BoundedLog(src))
	}
	return ctx, nil
}
