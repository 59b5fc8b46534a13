package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
)

// tenantsStorageKey is where the levels of the tenancy tree created or
// changed through the admin API are kept (Caddy storage; in a cluster,
// Redis), so they survive restarts and reloads.
const tenantsStorageKey = "llmgw/tenants.json"

// tenantEntry is one level of the tenancy tree created or changed through
// the admin API. A level the config file declares is overlaid: its limits
// and capacity are replaced by the entry's. Any other is created, under
// its parent (which the file or another entry declares).
type tenantEntry struct {
	Path     string    `json:"path"` // acme, acme/research or acme/research/alpha
	Limits   *Limits   `json:"limits,omitempty"`
	Capacity *Capacity `json:"capacity,omitempty"`
	// Overlay is true for a change to a level of the config file; when
	// the file no longer declares it, the entry is dropped rather than
	// bringing the level back.
	Overlay bool      `json:"overlay,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Changed time.Time `json:"changed,omitzero"`
}

// tenancy is the tree in force: the config's with the runtime entries laid
// over it.
type tenancy struct {
	orgs    []*Org
	entries []*tenantEntry
	config  map[string]bool // the paths the config file declares
}

var tenantKinds = [...]string{"", "org", "team", "project"}

func pathKind(path string) string { return tenantKinds[strings.Count(path, "/")+1] }

// configPaths lists the levels the config declares.
func configPaths(orgs []*Org) map[string]bool {
	out := map[string]bool{}
	for _, o := range orgs {
		out[o.Name] = true
		for _, t := range o.Teams {
			out[o.Name+"/"+t.Name] = true
			for _, p := range t.Projects {
				out[o.Name+"/"+t.Name+"/"+p.Name] = true
			}
		}
	}
	return out
}

// mergeTenancy lays entries over the config's tree. It copies the levels
// it changes; the config's own are never written. An entry that no longer
// fits (its parent is gone, its level left the file) is returned in
// dropped with the reason.
func mergeTenancy(config []*Org, entries []*tenantEntry) (*tenancy, map[string]string) {
	t := &tenancy{config: configPaths(config)}
	for _, o := range config {
		co := *o
		co.Teams = make([]*Team, len(o.Teams))
		for i, tm := range o.Teams {
			ct := *tm
			ct.Projects = make([]*Project, len(tm.Projects))
			for j, p := range tm.Projects {
				cp := *p
				ct.Projects[j] = &cp
			}
			co.Teams[i] = &ct
		}
		t.orgs = append(t.orgs, &co)
	}
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b *tenantEntry) int {
		return strings.Count(a.Path, "/") - strings.Count(b.Path, "/")
	})
	dropped := map[string]string{}
	for _, e := range sorted {
		if e.Overlay && !t.config[e.Path] {
			dropped[e.Path] = "the config file no longer declares it"
			continue
		}
		if !e.Overlay && t.config[e.Path] {
			dropped[e.Path] = "the config file declares it now; the file's limits apply"
			continue
		}
		if err := checkEntryPath(e.Path); err != nil {
			dropped[e.Path] = err.Error() // made before the rule
			continue
		}
		if why := t.apply(e); why != "" {
			dropped[e.Path] = why
			continue
		}
		t.entries = append(t.entries, e)
	}
	return t, dropped
}

// checkEntryPath checks each name of a runtime level's path against the
// id rule.
func checkEntryPath(path string) error {
	for i, name := range strings.Split(path, "/") {
		if err := CheckID(tenantKinds[min(i+1, 3)]+" name", name); err != nil {
			return err
		}
	}
	return nil
}

// apply lays one entry on the tree, or says why it cannot.
func (t *tenancy) apply(e *tenantEntry) string {
	parts := strings.Split(e.Path, "/")
	if len(parts) > 3 {
		return "a path has at most three parts"
	}
	var org *Org
	for _, o := range t.orgs {
		if o.Name == parts[0] {
			org = o
		}
	}
	if len(parts) == 1 {
		if org == nil {
			org = &Org{Name: parts[0]}
			t.orgs = append(t.orgs, org)
		}
		org.Limits, org.Capacity = e.Limits, e.Capacity
		return ""
	}
	if org == nil {
		return "its organisation " + parts[0] + " is gone"
	}
	var team *Team
	for _, tm := range org.Teams {
		if tm.Name == parts[1] {
			team = tm
		}
	}
	if len(parts) == 2 {
		if team == nil {
			team = &Team{Name: parts[1]}
			org.Teams = append(org.Teams, team)
		}
		team.Limits, team.Capacity = e.Limits, e.Capacity
		return ""
	}
	if team == nil {
		return "its team " + parts[0] + "/" + parts[1] + " is gone"
	}
	for _, p := range team.Projects {
		if p.Name == parts[2] {
			p.Limits, p.Capacity = e.Limits, e.Capacity
			return ""
		}
	}
	team.Projects = append(team.Projects, &Project{Name: parts[2], Limits: e.Limits, Capacity: e.Capacity})
	return ""
}

// find returns the level at path, its limits and capacity.
func (t *tenancy) find(path string) (limits *Limits, capacity *Capacity, ok bool) {
	parts := strings.Split(path, "/")
	for _, o := range t.orgs {
		if o.Name != parts[0] {
			continue
		}
		if len(parts) == 1 {
			return o.Limits, o.Capacity, true
		}
		for _, tm := range o.Teams {
			if tm.Name != parts[1] {
				continue
			}
			if len(parts) == 2 {
				return tm.Limits, tm.Capacity, true
			}
			for _, p := range tm.Projects {
				if len(parts) == 3 && p.Name == parts[2] {
					return p.Limits, p.Capacity, true
				}
			}
		}
	}
	return nil, nil, false
}

// children lists the paths of the levels right under path.
func (t *tenancy) children(path string) []string {
	var out []string
	for _, p := range t.paths() {
		if strings.HasPrefix(p, path+"/") && !strings.Contains(p[len(path)+1:], "/") {
			out = append(out, p)
		}
	}
	return out
}

// paths lists every level, in tree order.
func (t *tenancy) paths() []string {
	var out []string
	for _, o := range t.orgs {
		out = append(out, o.Name)
		for _, tm := range o.Teams {
			out = append(out, o.Name+"/"+tm.Name)
			for _, p := range tm.Projects {
				out = append(out, o.Name+"/"+tm.Name+"/"+p.Name)
			}
		}
	}
	return out
}

// Tenancy returns the tenancy tree in force: the config's organisations
// with the levels created or changed through the admin API. Callers must
// not change it.
func (a *App) Tenancy() []*Org {
	if a.tenants == nil {
		return a.Orgs
	}
	if t := a.tenants.Load(); t != nil {
		return t.orgs
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
	t, dropped := mergeTenancy(a.Orgs, entries)
	for p, why := range dropped {
		a.logger.Warn("ignoring a level of the tenancy tree changed at runtime", zap.String("level", p), zap.String("reason", why))
	}
	a.tenants.Store(t)
	return nil
}

func (a *App) loadTenantEntries(ctx context.Context) ([]*tenantEntry, error) {
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
	var entries []*tenantEntry
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
func (a *App) changeTenants(ctx context.Context, fn func(t *tenancy, entries []*tenantEntry, keys []*APIKey) ([]*tenantEntry, []*APIKey, error)) error {
	keysMu.Lock()
	defer keysMu.Unlock()
	cur := a.tenants.Load()
	entries := make([]*tenantEntry, len(cur.entries))
	for i, e := range cur.entries {
		c := *e
		entries[i] = &c
	}
	keys := slices.Clone(a.runtimeKeys)
	nextEntries, nextKeys, err := fn(cur, entries, keys)
	if err != nil {
		return err
	}
	next, dropped := mergeTenancy(a.Orgs, nextEntries)
	for p, why := range dropped {
		return apiErr(http.StatusBadRequest, "%s %s: %s", pathKind(p), p, why)
	}
	kr, err := newKeyring(next.orgs)
	if err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	for _, k := range nextKeys {
		if err := kr.add(k, k.Project); err != nil {
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
		b, err := json.Marshal(next.entries)
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
	if active.Load() == a {
		owners.Store(newOwnerTable(a.Tenancy()))
	}
}
