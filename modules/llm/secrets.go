package llm

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/internal/egress"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/secrets"

	"github.com/llmgw/llmgw/mirror"
)

// What the admin API may make llmgw read is the config file's decision
// (package secrets): its declared secrets, values at run time taken as
// they are, and runtime_hosts for the URLs set at run time.

// parseSecret parses "secret <name> <value>" in the llm block.
func (a *App) parseSecret(d *caddyfile.Dispenser) error { return secrets.Parse(d, &a.Secrets) }

// provisionSecrets resolves the declared secrets and makes the policy of
// URLs set at run time.
func (a *App) provisionSecrets() (err error) {
	a.secrets, err = secrets.New(a.Secrets, a.RuntimeHosts)
	return err
}

// Secret returns the value of a secret the config file declares.
func (a *App) Secret(name string) (string, bool) {
	if a == nil {
		return "", false
	}
	return a.secrets.Secret(name)
}

// RuntimeValue is what a value given through the admin API stands for
// (secrets.Set.RuntimeValue).
func (a *App) RuntimeValue(v string) (string, error) { return a.secrets.RuntimeValue(v) }

// FileValue is what a value from the config file stands for
// (secrets.Set.FileValue).
func (a *App) FileValue(repl *caddy.Replacer, v string) (string, error) {
	return a.secrets.FileValue(repl, v)
}

// Egress is the policy of URLs set at run time (see package egress).
func (a *App) Egress() *egress.Policy {
	if a == nil {
		return (*secrets.Set)(nil).Egress()
	}
	return a.secrets.Egress()
}

// Masked is how a secret given at run time is shown back (secrets.Masked).
func Masked(v string) string { return secrets.Masked(v) }

// resolveModel resolves m's source and options for its engine: values
// from the config file with their placeholders, values given at run time
// as they are (see RuntimeValue). It writes m only when m is not yet
// published or its values changed.
func (a *App) resolveModel(repl *caddy.Replacer, m *catalog.Model) error {
	for _, p := range m.Profiles { // once each (catalog.Profile.Resolve)
		if err := p.Resolve(func(what, v string) (string, error) { return a.modelValue(repl, m, what, v, m.FileVals != nil) }); err != nil {
			return err
		}
	}
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
		for _, p := range m.Profiles { // each profile's values, as the model's
			if err := a.checkRuntimeModel(ctx, &catalog.Model{Name: m.Name + " profile " + p.Name, Source: p.Source}, p.Options, nil); err != nil {
				return err
			}
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
	return a.secrets.CheckValue(ctx, what, v, isURL)
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
