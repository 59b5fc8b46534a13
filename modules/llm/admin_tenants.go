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

// tenantBody is the body of POST, PUT and PATCH on the tenancy routes.
type tenantBody struct {
	Name     string            `json:"name,omitempty"` // POST only
	Limits   *tenancy.Limits   `json:"limits,omitempty"`
	Capacity *tenancy.Capacity `json:"capacity,omitempty"`
}

const maxTenantBody = 1 << 20

// tenantRoute is a parsed path under /llm/tenants: a collection (the
// orgs, an org's teams, a team's projects) or one level.
type tenantRoute struct {
	parent string // the collection's parent level, "" for the orgs
	path   string // the level, "" for a collection
	kind   string
}

// parseTenantRoute reads /llm/tenants/orgs[/{org}[/teams[/{team}[/projects[/{project}]]]]].
func parseTenantRoute(p string) (tenantRoute, bool) {
	rest := strings.Trim(strings.TrimPrefix(p, "/llm/tenants"), "/")
	if rest == "" {
		return tenantRoute{}, true
	}
	segs := strings.Split(rest, "/")
	coll := [...]string{"orgs", "teams", "projects"}
	var names []string
	for i, s := range segs {
		if i%2 == 0 {
			if i/2 >= len(coll) || s != coll[i/2] {
				return tenantRoute{}, false
			}
			continue
		}
		if s == "" {
			return tenantRoute{}, false
		}
		names = append(names, s)
	}
	rt := tenantRoute{kind: tenancy.KindAt((len(segs) + 1) / 2)}
	if len(segs)%2 == 1 {
		rt.parent = strings.Join(names, "/")
		return rt, true
	}
	rt.path = strings.Join(names, "/")
	rt.parent = strings.Join(names[:len(names)-1], "/")
	return rt, true
}

// handleTenants serves every route under /llm/tenants.
func handleTenants(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	rt, ok := parseTenantRoute(r.URL.Path)
	if !ok {
		return apiErr(http.StatusNotFound, "no such tenancy route %s; use /llm/tenants/orgs[/{org}[/teams[/{team}[/projects[/{project}]]]]]", r.URL.Path)
	}
	switch {
	case rt.kind == "" && r.Method == http.MethodGet:
		return writeJSON(w, a.tenantLevels(a.tenants.Load().Paths()))
	case rt.kind == "":
		return apiErr(http.StatusMethodNotAllowed, "GET /llm/tenants lists every level; change one under /llm/tenants/orgs")
	case rt.path == "" && r.Method == http.MethodGet:
		return a.listTenants(w, rt)
	case rt.path == "" && r.Method == http.MethodPost:
		return a.createTenant(w, r, rt)
	case rt.path == "":
		return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET or POST", r.Method)
	case r.Method == http.MethodGet:
		if _, _, ok := a.tenants.Load().Find(rt.path); !ok {
			return apiErr(http.StatusNotFound, "no %s %s", rt.kind, rt.path)
		}
		return writeJSON(w, a.tenantLevels([]string{rt.path})[0])
	case r.Method == http.MethodPut || r.Method == http.MethodPatch:
		return a.changeTenant(w, r, rt)
	case r.Method == http.MethodDelete:
		return a.deleteTenant(w, r, rt)
	}
	return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET, PUT, PATCH or DELETE", r.Method)
}

func (a *App) listTenants(w http.ResponseWriter, rt tenantRoute) error {
	t := a.tenants.Load()
	var paths []string
	if rt.parent == "" {
		for _, o := range t.Orgs() {
			paths = append(paths, o.Name)
		}
	} else {
		if _, _, ok := t.Find(rt.parent); !ok {
			return apiErr(http.StatusNotFound, "no %s %s", tenancy.PathKind(rt.parent), rt.parent)
		}
		paths = t.Children(rt.parent)
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
func decodeTenantBody(w http.ResponseWriter, r *http.Request, dst *tenantBody) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxTenantBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil && err != io.EOF {
		return apiErr(http.StatusBadRequest, `the body must be JSON like {"name":"acme","limits":{"requests_per_minute":600},"capacity":{"memory":68719476736,"replicas":10}}: %v`, err)
	}
	return checkTenantBody(dst)
}

func checkTenantBody(b *tenantBody) error {
	if err := b.Limits.Validate(); err != nil {
		return apiErr(http.StatusBadRequest, "limits: %v", err)
	}
	if err := b.Capacity.Validate(); err != nil {
		return apiErr(http.StatusBadRequest, "capacity: %v", err)
	}
	if b.Capacity.IsZero() {
		b.Capacity = nil
	}
	return nil
}

func (a *App) createTenant(w http.ResponseWriter, r *http.Request, rt tenantRoute) error {
	var b tenantBody
	if err := decodeTenantBody(w, r, &b); err != nil {
		return err
	}
	if err := tenancy.CheckLevelName(rt.kind, b.Name, map[string]bool{}, b.Name); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	path := b.Name
	if rt.parent != "" {
		path = rt.parent + "/" + b.Name
	}
	err := a.changeTenants(r.Context(), func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error) {
		if rt.parent != "" {
			if _, _, ok := t.Find(rt.parent); !ok {
				return nil, nil, apiErr(http.StatusNotFound, "no %s %s to create the %s %s under", tenancy.PathKind(rt.parent), rt.parent, rt.kind, b.Name)
			}
		}
		if _, _, ok := t.Find(path); ok {
			return nil, nil, apiErr(http.StatusConflict, "%s %s exists; change it with PUT or PATCH", rt.kind, path)
		}
		at := now().UTC()
		return append(entries, &tenancy.Entry{Path: path, Limits: b.Limits, Capacity: b.Capacity, Created: at, Changed: at}), keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.auditTenant(r, "tenant level created", rt.kind, path, b)
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, a.tenantLevels([]string{path})[0])
}

// changeTenant answers PUT (the body replaces the level's limits and
// capacity) and PATCH (the body is a JSON merge patch of them: a field
// given replaces, null removes, one left out stays).
func (a *App) changeTenant(w http.ResponseWriter, r *http.Request, rt tenantRoute) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTenantBody))
	if err != nil {
		return apiErr(http.StatusBadRequest, "reading the body: %v", err)
	}
	var b tenantBody
	err = a.changeTenants(r.Context(), func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error) {
		l, c, ok := t.Find(rt.path)
		if !ok {
			return nil, nil, apiErr(http.StatusNotFound, "no %s %s; create it with POST /llm/tenants/%s", rt.kind, rt.path, collectionPath(rt))
		}
		if r.Method == http.MethodPatch {
			if err := mergePatch(&tenantBody{Limits: l, Capacity: c}, raw, &b); err != nil {
				return nil, nil, err
			}
		} else if err := strictJSON(raw, &b); err != nil {
			return nil, nil, err
		}
		if b.Name != "" && b.Name != rt.path[strings.LastIndex(rt.path, "/")+1:] {
			return nil, nil, apiErr(http.StatusBadRequest, "a level cannot be renamed; create a new one and move its keys and models")
		}
		b.Name = ""
		if err := checkTenantBody(&b); err != nil {
			return nil, nil, err
		}
		at := now().UTC()
		i := slices.IndexFunc(entries, func(e *tenancy.Entry) bool { return e.Path == rt.path })
		if i < 0 {
			entries = append(entries, &tenancy.Entry{Path: rt.path, Overlay: t.InConfig(rt.path), Created: at})
			i = len(entries) - 1
		}
		entries[i].Limits, entries[i].Capacity, entries[i].Changed = b.Limits, b.Capacity, at
		return entries, keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.auditTenant(r, "tenant level changed", rt.kind, rt.path, b)
	return writeJSON(w, a.tenantLevels([]string{rt.path})[0])
}

func collectionPath(rt tenantRoute) string {
	if rt.parent == "" {
		return "orgs"
	}
	parts := strings.Split(rt.parent, "/")
	if len(parts) == 1 {
		return "orgs/" + parts[0] + "/teams"
	}
	return "orgs/" + parts[0] + "/teams/" + parts[1] + "/projects"
}

func strictJSON(raw []byte, dst *tenantBody) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil && err != io.EOF {
		return apiErr(http.StatusBadRequest, `the body must be JSON like {"limits":{"requests_per_minute":600},"capacity":{"replicas":10}}: %v`, err)
	}
	return nil
}

// mergePatch applies the JSON merge patch raw (RFC 7386) to cur into dst.
func mergePatch(cur *tenantBody, raw []byte, dst *tenantBody) error {
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil {
		return apiErr(http.StatusBadRequest, `the body must be a JSON merge patch like {"limits":{"requests_per_minute":600}}: %v`, err)
	}
	b, _ := json.Marshal(cur)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	merged, _ := json.Marshal(mergeValue(doc, patch))
	return strictJSON(merged, dst)
}

func mergeValue(doc any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
			continue
		}
		d[k] = mergeValue(d[k], v)
	}
	return d
}

func (a *App) deleteTenant(w http.ResponseWriter, r *http.Request, rt tenantRoute) error {
	undo := r.URL.Query().Get("overlay") == "true" // a config level back to the file's limits
	err := a.changeTenants(r.Context(), func(t *tenancy.Tree, entries []*tenancy.Entry, keys []*tenancy.APIKey) ([]*tenancy.Entry, []*tenancy.APIKey, error) {
		if _, _, ok := t.Find(rt.path); !ok {
			return nil, nil, apiErr(http.StatusNotFound, "no %s %s", rt.kind, rt.path)
		}
		if t.InConfig(rt.path) && undo {
			i := slices.IndexFunc(entries, func(e *tenancy.Entry) bool { return e.Path == rt.path })
			if i < 0 {
				return nil, nil, apiErr(http.StatusNotFound, "%s %s has no runtime changes to undo", rt.kind, rt.path)
			}
			return slices.Delete(entries, i, i+1), keys, nil
		}
		if t.InConfig(rt.path) {
			return nil, nil, apiErr(http.StatusConflict, "%s %s is declared in the config file; remove it there (?overlay=true undoes only its runtime changes)", rt.kind, rt.path)
		}
		if ch := t.Children(rt.path); len(ch) > 0 {
			return nil, nil, apiErr(http.StatusConflict, "%s %s still has %ss (%s); delete them first", rt.kind, rt.path, tenancy.PathKind(ch[0]), strings.Join(ch, ", "))
		}
		lv := a.tenantLevels([]string{rt.path})[0]
		if len(lv.Models) > 0 {
			return nil, nil, apiErr(http.StatusConflict, "%s %s still owns models (%s); remove them or change their owner first", rt.kind, rt.path, strings.Join(lv.Models, ", "))
		}
		if lv.Keys > 0 {
			return nil, nil, apiErr(http.StatusConflict, "%s %s still has %s; revoke them first (GET /llm/keys?under=%s lists them)", rt.kind, rt.path, place.Plural(lv.Keys, "key"), rt.path)
		}
		// Revoked keys of its projects go with it.
		keys = slices.DeleteFunc(keys, func(k *tenancy.APIKey) bool { return k.Revoked != nil && place.Under(k.Project, rt.path) })
		return slices.DeleteFunc(entries, func(e *tenancy.Entry) bool { return e.Path == rt.path }), keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	msg := "tenant level deleted"
	if undo {
		msg = "tenant level reset to the config file"
	}
	a.audit(r, msg, zap.String("level", rt.kind), zap.String("path", rt.path))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *App) auditTenant(r *http.Request, msg, kind, path string, b tenantBody) {
	fields := []zap.Field{zap.String("level", kind), zap.String("path", path)}
	if js, err := json.Marshal(b.Limits); err == nil && b.Limits != nil {
		fields = append(fields, zap.ByteString("limits", js))
	}
	if js, err := json.Marshal(b.Capacity); err == nil && b.Capacity != nil {
		fields = append(fields, zap.ByteString("capacity", js))
	}
	a.audit(r, msg, fields...)
}
