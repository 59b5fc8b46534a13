package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"

	"github.com/llmgw/llmgw/modules/llm/place"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

// tenantsStorageKey is where the levels of the tenancy tree created or
// changed through the admin API are kept (Caddy storage; in a cluster,
// Redis), so they survive restarts and reloads.
const tenantsStorageKey = "llmgw/tenants.json"

// Tenancy returns the tenancy tree in force: the config's organisations
// with the levels created or changed through the admin API. Callers must
// not change it.
func (a *App) Tenancy() []*tenancy.Org {
	if a.tenants == nil {
		return a.Orgs
	}
	if t := a.tenants.Load(); t != nil {
		return t.Orgs()
	}
	return a.Orgs
}

// loadTenants reads the runtime levels and makes the tree in force; the
// caller then builds the keyring on it.
func (a *App) loadTenants(ctx context.Context) error {
	entries, err := a.loadTenantEntries(ctx)
	if err != nil {
		return err
	}
	t, dropped := tenancy.Merge(a.Orgs, entries)
	for p, why := range dropped {
		a.logger.Warn("ignoring a level of the tenancy tree changed at runtime", zap.String("level", p), zap.String("reason", why))
	}
	a.tenants.Store(t)
	return nil
}

func (a *App) loadTenantEntries(ctx context.Context) ([]*tenancy.Entry, error) {
	if a.storage == nil {
		return nil, nil
	}
	b, err := a.storage.Load(ctx, tenantsStorageKey)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading the tenancy changes from storage: %w", err)
	}
	var entries []*tenancy.Entry
	if err := json.Unmarshal(b, &entries); err != nil {
		return nil, fmt.Errorf("the tenancy changes in storage (%s) are corrupt: %w", tenantsStorageKey, err)
	}
	return entries, nil
}

// changeTenants applies fn to a copy of the runtime levels (and of the
// runtime keys, which a deletion may trim), checks the result as a whole
// (the tree, every key on it), persists it and puts it in force: the
// keyring, so llm_quota enforces the new limits from the next request,
// and the owners' capacities. Changes are serialized with key changes.
func (a *App) changeTenants(ctx context.Context, fn func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error)) error {
	a.shared.keysMu.Lock()
	defer a.shared.keysMu.Unlock()
	cur := a.tenants.Load()
	entries := make([]*tenancy.Entry, len(cur.Entries()))
	for i, e := range cur.Entries() {
		c := *e
		entries[i] = &c
	}
	keys := slices.Clone(a.runtimeKeys)
	nextEntries, nextKeys, err := fn(cur, entries, keys)
	if err != nil {
		return err
	}
	next, dropped := tenancy.Merge(a.Orgs, nextEntries)
	for p, why := range dropped {
		return apiErr(http.StatusBadRequest, "%s %s: %s", tenancy.PathKind(p), p, why)
	}
	kr, err := tenancy.NewKeyring(next.Orgs())
	if err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	for _, k := range nextKeys {
		if err := kr.Add(k, k.Project); err != nil {
			return apiErr(http.StatusBadRequest, "%v", err)
		}
	}
	if a.storage != nil {
		if len(nextKeys) != len(a.runtimeKeys) {
			b, err := json.Marshal(nextKeys)
			if err != nil {
				return err
			}
			if err := a.storage.Store(ctx, keysStorageKey, b); err != nil {
				return fmt.Errorf("saving keys to storage: %w", err)
			}
		}
		b, err := json.Marshal(next.Entries())
		if err != nil {
			return err
		}
		if err := a.storage.Store(ctx, tenantsStorageKey, b); err != nil {
			return fmt.Errorf("saving the tenancy to storage: %w", err)
		}
	}
	a.tenants.Store(next)
	a.runtimeKeys = nextKeys
	a.keys.Store(kr)
	a.putOwners()
	return nil
}

// putOwners makes this app's tree the one whose capacities the node's
// ledger checks, when this app is the one running.
func (a *App) putOwners() {
	if a.shared != nil && a.shared.running.Load() == a {
		a.node.Ledger.SetOwners(place.NewOwnerTable(a.Tenancy()))
	}
}
