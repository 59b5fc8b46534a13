package llm

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/place"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

const maxTenantBody = 1 << 20

// handleTenants serves every route under /llm/tenants.
func handleTenants(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	rt, ok := tenancy.ParseRoute(r.URL.Path)
	if !ok {
		return apiErr(http.StatusNotFound, "no such tenancy route %s; use /llm/tenants/orgs[/{org}[/teams[/{team}[/projects[/{project}]]]]]", r.URL.Path)
	}
	switch {
	case rt.Kind == "" && r.Method == http.MethodGet:
		return writeJSON(w, a.tenantLevels(a.tenants.Load().Paths()))
	case rt.Kind == "":
		return apiErr(http.StatusMethodNotAllowed, "GET /llm/tenants lists every level; change one under /llm/tenants/orgs")
	case rt.Path == "" && r.Method == http.MethodGet:
		return a.listTenants(w, rt)
	case rt.Path == "" && r.Method == http.MethodPost:
		return a.createTenant(w, r, rt)
	case rt.Path == "":
		return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET or POST", r.Method)
	case r.Method == http.MethodGet:
		if _, _, ok := a.tenants.Load().Find(rt.Path); !ok {
			return apiErr(http.StatusNotFound, "no %s %s", rt.Kind, rt.Path)
		}
		return writeJSON(w, a.tenantLevels([]string{rt.Path})[0])
	case r.Method == http.MethodPut || r.Method == http.MethodPatch:
		return a.changeTenant(w, r, rt)
	case r.Method == http.MethodDelete:
		return a.deleteTenant(w, r, rt)
	}
	return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET, PUT, PATCH or DELETE", r.Method)
}

func (a *App) listTenants(w http.ResponseWriter, rt tenancy.Route) error {
	t := a.tenants.Load()
	var paths []string
	if rt.Parent == "" {
		for _, o := range t.Orgs() {
			paths = append(paths, o.Name)
		}
	} else {
		if _, _, ok := t.Find(rt.Parent); !ok {
			return apiErr(http.StatusNotFound, "no %s %s", tenancy.PathKind(rt.Parent), rt.Parent)
		}
		paths = t.Children(rt.Parent)
	}
	return writeJSON(w, a.tenantLevels(paths))
}

// tenantLevels describes the levels at paths.
func (a *App) tenantLevels(paths []string) []llmapi.TenantLevel {
	t, kr, v := a.tenants.Load(), a.keys.Load(), a.v()
	runtime := map[string]bool{}
	for _, e := range t.Entries() {
		runtime[e.Path] = true
	}
	out := make([]llmapi.TenantLevel, 0, len(paths))
	for _, p := range paths {
		l, c, _ := t.Find(p)
		lv := llmapi.TenantLevel{Kind: tenancy.PathKind(p), Path: p, Name: p[strings.LastIndex(p, "/")+1:], Source: "config",
			Limits: l, Capacity: c, Used: a.node.Ledger.UseOf(p), Children: t.Children(p)}
		switch {
		case runtime[p] && t.InConfig(p):
			lv.Source = "config+runtime"
		case runtime[p]:
			lv.Source = "runtime"
		}
		for _, m := range v.models {
			if place.Under(m.Owner, p) {
				lv.Models = append(lv.Models, m.Name)
			}
		}
		for _, k := range kr.Keys() {
			if k.Revoked == nil && place.Under(keyProject(kr, k), p) {
				lv.Keys++
			}
		}
		out = append(out, lv)
	}
	return out
}

// keyProject is the project a key belongs to, config or runtime.
func keyProject(kr *tenancy.Keyring, k *tenancy.APIKey) string {
	if k.Project != "" {
		return k.Project
	}
	if t, ok := kr.ByHash(strings.ToLower(k.SHA256)); ok {
		return t.Project
	}
	return ""
}

// decodeTenantBody reads a tenancy body and checks its values.
func decodeTenantBody(w http.ResponseWriter, r *http.Request, dst *tenancy.Body) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTenantBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil && err != io.EOF {
		return apiErr(http.StatusBadRequest, `the body must be JSON like {"name":"acme","limits":{"requests_per_minute":600},"capacity":{"memory":68719476736,"replicas":10}}: %v`, err)
	}
	if err := dst.Check(); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	return nil
}

func (a *App) createTenant(w http.ResponseWriter, r *http.Request, rt tenancy.Route) error {
	var b tenancy.Body
	if err := decodeTenantBody(w, r, &b); err != nil {
		return err
	}
	if err := tenancy.CheckLevelName(rt.Kind, b.Name, map[string]bool{}, b.Name); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	path := b.Name
	if rt.Parent != "" {
		path = rt.Parent + "/" + b.Name
	}
	err := a.changeTenants(r.Context(), func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error) {
		if rt.Parent != "" {
			if _, _, ok := t.Find(rt.Parent); !ok {
				return nil, nil, apiErr(http.StatusNotFound, "no %s %s to create the %s %s under", tenancy.PathKind(rt.Parent), rt.Parent, rt.Kind, b.Name)
			}
		}
		if _, _, ok := t.Find(path); ok {
			return nil, nil, apiErr(http.StatusConflict, "%s %s exists; change it with PUT or PATCH", rt.Kind, path)
		}
		at := now().UTC()
		return append(entries, &tenancy.Entry{Path: path, Limits: b.Limits, Capacity: b.Capacity, Created: at, Changed: at}), keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.auditTenant(r, "tenant level created", rt.Kind, path, b)
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, a.tenantLevels([]string{path})[0])
}

// changeTenant answers PUT (the body replaces the level's limits and
// capacity) and PATCH (the body is a JSON merge patch of them: a field
// given replaces, null removes, one left out stays).
func (a *App) changeTenant(w http.ResponseWriter, r *http.Request, rt tenancy.Route) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTenantBody))
	if err != nil {
		return apiErr(http.StatusBadRequest, "reading the body: %v", err)
	}
	var b tenancy.Body
	err = a.changeTenants(r.Context(), func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error) {
		l, c, ok := t.Find(rt.Path)
		if !ok {
			return nil, nil, apiErr(http.StatusNotFound, "no %s %s; create it with POST /llm/tenants/%s", rt.Kind, rt.Path, rt.CollectionPath())
		}
		if r.Method == http.MethodPatch {
			if err := tenancy.MergePatch(&tenancy.Body{Limits: l, Capacity: c}, raw, &b); err != nil {
				return nil, nil, apiErr(http.StatusBadRequest, "%v", err)
			}
		} else if err := tenancy.DecodeBody(raw, &b); err != nil {
			return nil, nil, apiErr(http.StatusBadRequest, "%v", err)
		}
		if b.Name != "" && b.Name != rt.Path[strings.LastIndex(rt.Path, "/")+1:] {
			return nil, nil, apiErr(http.StatusBadRequest, "a level cannot be renamed; create a new one and move its keys and models")
		}
		b.Name = ""
		if err := b.Check(); err != nil {
			return nil, nil, apiErr(http.StatusBadRequest, "%v", err)
		}
		at := now().UTC()
		i := slices.IndexFunc(entries, func(e *tenancy.Entry) bool { return e.Path == rt.Path })
		if i < 0 {
			entries = append(entries, &tenancy.Entry{Path: rt.Path, Overlay: t.InConfig(rt.Path), Created: at})
			i = len(entries) - 1
		}
		entries[i].Limits, entries[i].Capacity, entries[i].Changed = b.Limits, b.Capacity, at
		return entries, keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.auditTenant(r, "tenant level changed", rt.Kind, rt.Path, b)
	return writeJSON(w, a.tenantLevels([]string{rt.Path})[0])
}

func (a *App) deleteTenant(w http.ResponseWriter, r *http.Request, rt tenancy.Route) error {
	undo := r.URL.Query().Get("overlay") == "true" // a config level back to the file's limits
	err := a.changeTenants(r.Context(), func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error) {
		if _, _, ok := t.Find(rt.Path); !ok {
			return nil, nil, apiErr(http.StatusNotFound, "no %s %s", rt.Kind, rt.Path)
		}
		if t.InConfig(rt.Path) && undo {
			i := slices.IndexFunc(entries, func(e *tenancy.Entry) bool { return e.Path == rt.Path })
			if i < 0 {
				return nil, nil, apiErr(http.StatusNotFound, "%s %s has no runtime changes to undo", rt.Kind, rt.Path)
			}
			return slices.Delete(entries, i, i+1), keys, nil
		}
		if t.InConfig(rt.Path) {
			return nil, nil, apiErr(http.StatusConflict, "%s %s is declared in the config file; remove it there (?overlay=true undoes only its runtime changes)", rt.Kind, rt.Path)
		}
		if ch := t.Children(rt.Path); len(ch) > 0 {
			return nil, nil, apiErr(http.StatusConflict, "%s %s still has %ss (%s); delete them first", rt.Kind, rt.Path, tenancy.PathKind(ch[0]), strings.Join(ch, ", "))
		}
		lv := a.tenantLevels([]string{rt.Path})[0]
		if len(lv.Models) > 0 {
			return nil, nil, apiErr(http.StatusConflict, "%s %s still owns models (%s); remove them or change their owner first", rt.Kind, rt.Path, strings.Join(lv.Models, ", "))
		}
		if lv.Keys > 0 {
			return nil, nil, apiErr(http.StatusConflict, "%s %s still has %s; revoke them first (GET /llm/keys?under=%s lists them)", rt.Kind, rt.Path, place.Plural(lv.Keys, "key"), rt.Path)
		}
		// Revoked keys of its projects go with it.
		keys = slices.DeleteFunc(keys, func(k *tenancy.APIKey) bool { return k.Revoked != nil && place.Under(k.Project, rt.Path) })
		return slices.DeleteFunc(entries, func(e *tenancy.Entry) bool { return e.Path == rt.Path }), keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	msg := "tenant level deleted"
	if undo {
		msg = "tenant level reset to the config file"
	}
	a.audit(r, msg, zap.String("level", rt.Kind), zap.String("path", rt.Path))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *App) auditTenant(r *http.Request, msg, kind, path string, b tenancy.Body) {
	fields := []zap.Field{zap.String("level", kind), zap.String("path", path)}
	if js, err := json.Marshal(b.Limits); err == nil && b.Limits != nil {
		fields = append(fields, zap.ByteString("limits", js))
	}
	if js, err := json.Marshal(b.Capacity); err == nil && b.Capacity != nil {
		fields = append(fields, zap.ByteString("capacity", js))
	}
	a.audit(r, msg, fields...)
}
