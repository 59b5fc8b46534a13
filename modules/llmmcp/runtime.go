package llmmcp

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
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
// names the config does not use, resolved.
func mergeRuntime(configured []*ServerConfig) []*ServerConfig {
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
	repl := caddy.NewReplacer()
	for _, s := range added {
		if used[s.Name] {
			continue
		}
		if r, err := s.resolve(repl); err == nil {
			out = append(out, r)
		}
	}
	return out
}
