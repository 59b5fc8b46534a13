package llmmcp

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
)

// The servers added and the servers disabled through the admin API. They
// live beside the pools, so they survive reloads, and in Caddy's storage,
// so they survive restarts.
var (
	rtMu      sync.Mutex
	rtAdded   = map[string]*ServerConfig{} // name → config as added (placeholders unresolved)
	rtOff     = map[string]bool{}
	rtStorage certmagic.Storage
	rtLoaded  bool
)

const storageKey = "llm_mcp/runtime.json"

type persisted struct {
	Added    []*ServerConfig `json:"added,omitempty"`
	Disabled []string        `json:"disabled,omitempty"`
}

// setStorage remembers Caddy's storage and, the first time, loads what an
// earlier run added or disabled.
func setStorage(ctx caddy.Context) {
	st := ctx.Storage()
	rtMu.Lock()
	defer rtMu.Unlock()
	rtStorage = st
	if rtLoaded || st == nil {
		return
	}
	rtLoaded = true
	raw, err := st.Load(context.Background(), storageKey)
	if err != nil {
		return
	}
	var p persisted
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	for _, s := range p.Added {
		rtAdded[s.Name] = s
	}
	for _, n := range p.Disabled {
		rtOff[n] = true
	}
}

// save writes the runtime changes; called with rtMu held.
func save() error {
	if rtStorage == nil {
		return nil
	}
	var p persisted
	for _, s := range rtAdded {
		p.Added = append(p.Added, s)
	}
	sort.Slice(p.Added, func(i, j int) bool { return p.Added[i].Name < p.Added[j].Name })
	for n := range rtOff {
		p.Disabled = append(p.Disabled, n)
	}
	sort.Strings(p.Disabled)
	raw, _ := json.Marshal(p)
	return rtStorage.Store(context.Background(), storageKey, raw)
}

func isDisabled(name string) bool {
	rtMu.Lock()
	defer rtMu.Unlock()
	return rtOff[name]
}

// mergeRuntime is the configured servers plus the runtime-added ones whose
// names the config does not use, resolved as values given at run time.
// A command server whose command this gateway's allow_commands no longer
// lists is left out, and so is one whose values no longer resolve.
func (g *gateway) mergeRuntime(configured []*ServerConfig) []*ServerConfig {
	out := append([]*ServerConfig(nil), configured...)
	used := map[string]bool{}
	for _, c := range configured {
		used[c.Name] = true
	}
	rtMu.Lock()
	added := make([]*ServerConfig, 0, len(rtAdded))
	for _, s := range rtAdded {
		added = append(added, s)
	}
	rtMu.Unlock()
	sort.Slice(added, func(i, j int) bool { return added[i].Name < added[j].Name })
	for _, s := range added {
		if used[s.Name] {
			continue
		}
		if err := g.runtimeAllowed(s); err != nil {
			g.logger.Warn("mcp server added at run time left out", zap.String("server", s.Name), zap.Error(err))
			continue
		}
		r, err := resolveRuntime(g.app.Load(), s)
		if err != nil {
			g.logger.Warn("mcp server added at run time left out", zap.String("server", s.Name), zap.Error(err))
			continue
		}
		out = append(out, r)
	}
	return out
}

// runtimeAllowed checks what a server added at run time may be in this
// gateway: a command only from its allow_commands, its name free of the
// separator.
func (g *gateway) runtimeAllowed(s *ServerConfig) error {
	if strings.Contains(s.Name, g.sep) {
		return fmt.Errorf("mcp server %q: its name holds the tool name separator %q; choose a name without it", s.Name, g.sep)
	}
	if s.Command != "" && !commandAllowed(g.allow, s.Command) {
		return errNotAllowed(s.Command)
	}
	return nil
}

func errNotAllowed(command string) error {
	return fmt.Errorf("command %q is not in allow_commands: a local server added at run time may run only a command the config file lists, as llm_mcp { allow_commands /usr/local/bin/mcp-* } (JSON: allow_commands); add it there, or give the server in the config file", clip(command))
}

// resolveRuntime checks and resolves a server added at run time: its
// values as they are or secret:NAME (placeholders refused), and, for a
// command server, its env and dir. The result connects through app's
// egress policy (url servers and their OAuth).
func resolveRuntime(app *llm.App, s *ServerConfig) (*ServerConfig, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if s.Command != "" {
		env := map[string]string{}
		maps.Copy(env, s.Env)
		for _, tc := range s.Tenants {
			maps.Copy(env, tc.Env)
		}
		if err := checkRuntimeEnv(s.Name, env); err != nil {
			return nil, err
		}
		if err := checkRuntimeDir(s.Name, s.Dir); err != nil {
			return nil, err
		}
	}
	r, err := s.resolve(app.RuntimeValue)
	if err != nil {
		return nil, err
	}
	if r.Command != "" {
		r.Command = filepath.Clean(r.Command) // the path allow_commands matched
	}
	r.runtime, r.egress = true, app.Egress()
	return r, nil
}
