// Package secrets is what the admin API may make llmgw read, decided by
// the config file: the secrets it declares (llm { secret NAME <value> }),
// values given at run time taken as they are (a placeholder such as
// {env.NAME} or {file.path} is resolved only in the config file), and
// the policy of the URLs set at run time (runtime_hosts). A secret given
// at run time is never shown back: Masked is how it is shown.
package secrets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/internal/egress"
)

// Ref is the prefix of a value that names a declared secret.
const Ref = "secret:"

// hostsHint is how the config widens the URLs set at run time.
const hostsHint = "llm { runtime_hosts <host or range> }"

// placeholder finds a Caddy global placeholder ({env.X}, {file./p},
// {system.hostname}, {time.now}) in a value; an engine template's
// "{{ .Prompt }}" is not one.
var placeholder = regexp.MustCompile(`\{[a-z_]+\.[^{}\s]*\}`)

// ErrRuntimePlaceholder is the error of a value given at run time that
// holds a placeholder.
var ErrRuntimePlaceholder = errors.New("placeholders such as {env.NAME} and {file.path} are resolved only in the config file; at run time give the value itself, or secret:NAME for a secret the config file declares (llm { secret NAME <value> })")

// Parse parses "secret <name> <value>" in the llm block into declared.
func Parse(d *caddyfile.Dispenser, declared *map[string]string) error {
	var name, value string
	if !d.Args(&name, &value) || d.NextArg() {
		return d.ArgErr()
	}
	if err := CheckName(name); err != nil {
		return d.Err(err.Error())
	}
	if _, dup := (*declared)[name]; dup {
		return d.Errf("secret %q is declared twice", name)
	}
	if *declared == nil {
		*declared = map[string]string{}
	}
	(*declared)[name] = value
	return nil
}

// CheckName checks a secret's name.
func CheckName(name string) error {
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

// Set is a config's secrets, resolved, and its policy of URLs set at run
// time. A nil Set declares nothing and allows only public addresses.
type Set struct {
	values map[string]string
	egress *egress.Policy
}

// New resolves the declared secrets' placeholders and makes the policy of
// the URLs set at run time from runtimeHosts.
func New(declared map[string]string, runtimeHosts []string) (*Set, error) {
	repl := caddy.NewReplacer()
	s := &Set{values: make(map[string]string, len(declared))}
	for name, v := range declared {
		if err := CheckName(name); err != nil {
			return nil, err
		}
		s.values[name] = repl.ReplaceKnown(v, "")
	}
	p, err := egress.New(runtimeHosts, hostsHint)
	if err != nil {
		return nil, fmt.Errorf("runtime_hosts: %w", err)
	}
	s.egress = p
	return s, nil
}

// Secret returns the value of a secret the config file declares.
func (s *Set) Secret(name string) (string, bool) {
	if s == nil {
		return "", false
	}
	v, ok := s.values[name]
	return v, ok
}

// RuntimeValue is what a value given through the admin API stands for:
// the value itself, or the declared secret that secret:NAME names. A
// value with a placeholder is refused: see ErrRuntimePlaceholder.
func (s *Set) RuntimeValue(v string) (string, error) {
	if name, ok := strings.CutPrefix(v, Ref); ok {
		val, found := s.Secret(name)
		if !found {
			return "", fmt.Errorf("%s names no secret the config file declares; declare it with llm { secret %s <value> }", v, name)
		}
		return val, nil
	}
	if placeholder.MatchString(v) {
		return "", ErrRuntimePlaceholder
	}
	return v, nil
}

// FileValue is what a value from the config file stands for: its
// placeholders resolved, or the declared secret that secret:NAME names.
func (s *Set) FileValue(repl *caddy.Replacer, v string) (string, error) {
	if strings.HasPrefix(v, Ref) {
		return s.RuntimeValue(v)
	}
	return repl.ReplaceKnown(v, ""), nil
}

// Egress is the policy of URLs set at run time (see package egress).
func (s *Set) Egress() *egress.Policy {
	if s == nil || s.egress == nil {
		p, _ := egress.New(nil, hostsHint)
		return p
	}
	return s.egress
}

// CheckValue checks a value given at run time (what names it in the
// error): no placeholder, a declared secret, and for a URL one the
// egress policy allows.
func (s *Set) CheckValue(ctx context.Context, what, v string, isURL bool) error {
	val, err := s.RuntimeValue(v)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if isURL && (strings.HasPrefix(val, "http://") || strings.HasPrefix(val, "https://")) {
		if _, err := s.Egress().CheckURL(ctx, val); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// Masked is how a secret given at run time is shown back: never its
// value, only a fingerprint that tells two values apart.
func Masked(v string) string {
	if v == "" || strings.HasPrefix(v, Ref) {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "*** sha256:" + hex.EncodeToString(sum[:4])
}

// Option says whether an engine option holds a credential, to be masked
// wherever it is shown (the audit log).
func Option(key string) bool {
	k := strings.ToLower(key)
	for _, s := range []string{"key", "token", "secret", "password", "auth", "credential"} {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// MaskOptions returns opts with credentials masked.
func MaskOptions(opts map[string]string) map[string]string {
	if opts == nil {
		return nil
	}
	out := maps.Clone(opts)
	for k, v := range out {
		if Option(k) {
			out[k] = Masked(v)
		}
	}
	return out
}
