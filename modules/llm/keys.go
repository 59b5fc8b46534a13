package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

// keysStorageKey is where keys created through the admin API are kept in
// Caddy's storage, so they survive restarts.
const keysStorageKey = "llmgw/keys.json"

// Authenticate resolves a secret to its tenant.
func (a *App) Authenticate(secret string) (*tenancy.Tenant, error) {
	if secret == "" {
		return nil, tenancy.ErrNoKey
	}
	kr := a.keys.Load()
	if t, ok := kr.Lookup(secret); ok {
		return t, nil
	}
	// In a cluster the key may have been minted on another node a moment
	// ago, before its change reached this one.
	if a.cluster != nil && a.cluster.refreshKeys(a.clusterSide()) {
		if t, ok := a.keys.Load().Lookup(secret); ok {
			return t, nil
		}
	}
	return nil, tenancy.ErrUnknownKey
}

// HasTenants reports whether any organisation is configured.
func (a *App) HasTenants() bool { return len(a.Tenancy()) > 0 }

// loadRuntimeKeys reads the keys created through the admin API.
func (a *App) loadRuntimeKeys(ctx context.Context) ([]*tenancy.APIKey, error) {
	if a.storage == nil {
		return nil, nil
	}
	b, err := a.storage.Load(ctx, keysStorageKey)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading runtime keys from storage: %w", err)
	}
	var keys []*tenancy.APIKey
	if err := json.Unmarshal(b, &keys); err != nil {
		return nil, fmt.Errorf("runtime keys in storage (%s) are corrupt: %w", keysStorageKey, err)
	}
	return keys, nil
}

// rebuildKeys makes the keyring from the config and the runtime keys.
func (a *App) rebuildKeys(runtime []*tenancy.APIKey) error {
	kr, err := tenancy.NewKeyring(a.Tenancy())
	if err != nil {
		return err
	}
	for _, k := range runtime {
		if err := kr.Add(k, k.Project); err != nil {
			a.logger.Warn("ignoring runtime key", zap.String("key", catalog.BoundedLog(k.ID)), zap.Error(err))
			continue
		}
		if err := catalog.CheckID("key id", k.ID); err != nil {
			// Made before the rule: it works, but no route can name it.
			a.logger.Warn("runtime key id breaks the id rule; the admin API cannot name it: remove it from "+keysStorageKey+" in storage to revoke it",
				zap.String("key", catalog.BoundedLog(k.ID)), zap.Error(err))
		}
	}
	a.runtimeKeys = runtime
	a.keys.Store(kr)
	return nil
}

func (a *App) keyInfos() []llmapi.KeyInfo {
	kr := a.keys.Load()
	runtime := map[string]bool{}
	for _, k := range a.runtimeKeys {
		runtime[k.ID] = true
	}
	var out []llmapi.KeyInfo
	for id, k := range kr.Keys() {
		info := llmapi.KeyInfo{ID: id, Project: k.Project, Source: "config", Created: k.Created, Revoked: k.Revoked, Limits: k.Limits}
		if runtime[id] {
			info.Source = "runtime"
		}
		if t, ok := kr.ByHash(k.SHA256); ok {
			info.Project, info.Levels = t.Project, t.Levels
			eff := t.Effective
			info.Effective = &eff
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// changeKeys applies fn to a copy of the runtime keys, persists the result
// and swaps the keyring. Changes are serialized.
func (a *App) changeKeys(ctx context.Context, fn func(keys []*tenancy.APIKey) ([]*tenancy.APIKey, error)) error {
	a.shared.keysMu.Lock()
	defer a.shared.keysMu.Unlock()
	cur := make([]*tenancy.APIKey, len(a.runtimeKeys))
	for i, k := range a.runtimeKeys {
		c := *k
		cur[i] = &c
	}
	next, err := fn(cur)
	if err != nil {
		return err
	}
	kr, err := tenancy.NewKeyring(a.Tenancy())
	if err != nil {
		return err
	}
	for _, k := range next {
		if err := kr.Add(k, k.Project); err != nil {
			return err
		}
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	if a.storage != nil {
		if err := a.storage.Store(ctx, keysStorageKey, b); err != nil {
			return fmt.Errorf("saving keys to storage: %w", err)
		}
	}
	a.runtimeKeys = next
	a.keys.Store(kr)
	return nil
}
