package llmadmin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// scope is the part of the tenancy tree a tenant admin manages: an
// organisation, a team or a project, by path.
type scope struct {
	level string   // org, team or project
	path  string   // acme, acme/research or acme/research/alpha
	parts []string // path's names
	// models are the model globs of each level from the organisation down
	// to the scope; a model is the tenant's when every non-empty list
	// matches it.
	models [][]string
}

var depth = map[string]int{"org": 1, "team": 2, "project": 3}

func (s *scope) String() string { return s.level + " " + s.path }

// newScope checks that a level exists in the llm app's tenancy tree and
// notes what models its limits allow.
func newScope(level, tenant string, app *llm.App) (*scope, error) {
	n, ok := depth[level]
	if !ok {
		return nil, fmt.Errorf("tenant_admin needs a level: org, team or project, then its path")
	}
	parts := strings.Split(tenant, "/")
	if len(parts) != n || tenant == "" {
		return nil, fmt.Errorf("a %s is named by %d parts separated by '/' (%s), not %q", level, n,
			[]string{"", "org", "org/team", "org/team/project"}[n], tenant)
	}
	s := &scope{level: level, path: tenant, parts: parts}
	if app == nil || !app.HasTenants() {
		return nil, fmt.Errorf("tenant_admin %s: the llm app declares no tenancy (org blocks)", s)
	}
	if !s.find(app.Tenancy()) {
		return nil, fmt.Errorf("tenant_admin %s: no such %s in the llm app's tenancy", s, level)
	}
	return s, nil
}

// find walks the tree down to the scope, noting each level's models.
func (s *scope) find(orgs []*tenancy.Org) bool {
	note := func(l *tenancy.Limits) {
		if l != nil {
			s.models = append(s.models, l.Models)
		}
	}
	for _, o := range orgs {
		if o.Name != s.parts[0] {
			continue
		}
		note(o.Limits)
		if len(s.parts) == 1 {
			return true
		}
		for _, t := range o.Teams {
			if t.Name != s.parts[1] {
				continue
			}
			note(t.Limits)
			if len(s.parts) == 2 {
				return true
			}
			for _, p := range t.Projects {
				if p.Name == s.parts[2] {
					note(p.Limits)
					return true
				}
			}
		}
	}
	return false
}

// holds says whether a node of the tenancy tree (kind org, team or
// project, by path) is inside the scope.
func (s *scope) holds(kind, nodePath string) bool {
	parts := strings.Split(nodePath, "/")
	if n, ok := depth[kind]; !ok || len(parts) != n || n < len(s.parts) {
		return false
	}
	for i, p := range s.parts {
		if parts[i] != p {
			return false
		}
	}
	return true
}

// allows says whether the tenant may use a model by any of its names.
func (s *scope) allows(names ...string) bool {
	for _, globs := range s.models {
		if len(globs) > 0 && !tenancy.MatchAny(globs, names) {
			return false
		}
	}
	return true
}

func forbidden(format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusForbidden, Err: fmt.Errorf(format, args...)}
}

// maxBody bounds the request bodies llm_admin reads itself.
const maxBody = 1 << 20

// checkTenant refuses a tenant admin's request that reaches outside its
// scope. Lists are filtered afterwards, in serveFiltered.
func (h *Handler) checkTenant(id *identity, access tenantAccess, r *http.Request) error {
	s := id.scope
	switch access {
	case tenantModel:
		name := strings.TrimPrefix(r.URL.Path, "/llm/models/")
		names := []string{name}
		if h.app != nil {
			if m, err := h.app.Lookup(name); err == nil {
				names = append(names, m.Name)
			}
		}
		if !s.allows(names...) {
			return forbidden("model %q is not allowed to %s; %s sees only its models", name, s, id.actor)
		}
	case tenantKeyCreate:
		return checkKeyCreate(id, r)
	case tenantLicence:
		return checkLicenceTenant(id, r)
	case tenantKey:
		keyID, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/llm/keys/"), "/")
		return h.checkKey(r, id, keyID)
	case tenantRequests:
		return narrowRequests(id, r)
	case tenantUsage:
		q := r.URL.Query()
		named := false
		for _, kind := range []string{"org", "team", "project"} {
			if v := q.Get(kind); v != "" {
				named = true
				if !s.holds(kind, v) {
					return forbidden("%s %q is outside %s; %s reads usage only there", kind, v, s, id.actor)
				}
			}
		}
		if k := q.Get("key"); k != "" {
			named = true
			if err := h.checkKey(r, id, k); err != nil {
				return err
			}
		}
		if !named {
			return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf("name a node inside %s: ?%s=%s, or a project or key of it", s, s.level, s.path)}
		}
	}
	return nil
}

// narrowRequests narrows a tenant admin's read of the request log to
// its tenant: tenant= is set to the scope when absent, and must be inside
// it when given. The log answers a request outside it as one it does not
// hold.
func narrowRequests(id *identity, r *http.Request) error {
	q := r.URL.Query()
	s := id.scope
	t := strings.Trim(q.Get("tenant"), "/")
	if t == "" {
		q.Set("tenant", strings.Join(s.parts, "/"))
		r.URL.RawQuery = q.Encode()
		return nil
	}
	kind := [...]string{"", "org", "team", "project"}[min(strings.Count(t, "/")+1, 3)]
	if !s.holds(kind, t) {
		return forbidden("tenant %q is outside %s; %s reads the requests of %s only", catalog.Bounded(t), s, id.actor, strings.Join(s.parts, "/"))
	}
	return nil
}

// errTenantKeyID refuses a tenant admin's choice of a key id. Key ids
// are one namespace over every tenant (so that /llm/keys/{id} names one
// key), and a choice that failed only when another tenant holds the id
// would tell whether it does: llmgw names a tenant admin's keys.
const errTenantKeyID = "a tenant admin does not choose a key's id: ids are shared by every tenant, so llmgw names the key (key-…); leave \"id\" out"

// checkKeyCreate refuses a tenant admin's new key outside its scope, or
// with an id of its choosing.
func checkKeyCreate(id *identity, r *http.Request) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return badRequest("reading the body: %v", err)
	}
	if len(raw) > maxBody {
		return badRequest("the body is over %d bytes; a key's body is its project, limits and no id", maxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var req struct {
		Project string  `json:"project"`
		ID      *string `json:"id"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return badRequest("the body must be JSON like {\"project\":\"org/team/project\"}: %v", err)
	}
	if !id.scope.holds("project", req.Project) {
		return forbidden("project %s is outside %s; %s creates keys only there", catalog.Bounded(req.Project), id.scope, id.actor)
	}
	if req.ID != nil && *req.ID != "" {
		return badRequest("%s", errTenantKeyID)
	}
	return nil
}

// checkLicenceTenant refuses a licence acceptance for a tenant outside
// the tenant admin's part of the tenancy (or for everyone).
func checkLicenceTenant(id *identity, r *http.Request) error {
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(raw) > maxBody {
		return badRequest("the body must be JSON like {\"tenant\":\"org/team\"} of at most %d bytes", maxBody)
	}
	r.Body = io.NopCloser(bytes.NewReader(raw))
	var req struct {
		Tenant string `json:"tenant"`
	}
	_ = json.Unmarshal(raw, &req)
	parts := strings.Split(req.Tenant, "/")
	kinds := []string{"", "org", "team", "project"}
	if req.Tenant == "" || len(parts) > 3 || !id.scope.holds(kinds[len(parts)], req.Tenant) {
		return forbidden("tenant %s is outside %s; %s accepts licences only there (name a tenant in the body: {\"tenant\":\"%s\"})",
			catalog.Bounded(req.Tenant), id.scope, id.actor, id.scope.path)
	}
	return nil
}

func badRequest(format string, args ...any) error {
	return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: fmt.Errorf(format, args...)}
}

// checkKey refuses a key that is not the tenant's.
func (h *Handler) checkKey(r *http.Request, id *identity, keyID string) error {
	if err := catalog.CheckID("key id", keyID); err != nil {
		return badRequest("%v", err)
	}
	keys, err := h.keyProjects(r)
	if err != nil {
		return err
	}
	// A key of another tenant and a key that does not exist answer the
	// same, so that a tenant admin cannot learn which ids others hold.
	if project, ok := keys[keyID]; !ok || !id.scope.holds("project", project) {
		return forbidden("key %s is not a key of %s; %s manages only its own keys (GET /llm/keys lists them)", catalog.Bounded(keyID), id.scope, id.actor)
	}
	return nil
}

// keyProjects asks GET /llm/keys which project each key belongs to.
func (h *Handler) keyProjects(r *http.Request) (map[string]string, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/llm/keys", nil)
	if err != nil {
		return nil, err
	}
	rec := newRecorder()
	h.routes.ServeHTTP(rec, req)
	var keys []struct{ ID, Project string }
	if rec.status != http.StatusOK {
		return nil, caddy.APIError{HTTPStatus: rec.status, Err: fmt.Errorf("listing keys: %s", bytes.TrimSpace(rec.body.Bytes()))}
	}
	if err := json.Unmarshal(rec.body.Bytes(), &keys); err != nil {
		return nil, fmt.Errorf("listing keys: %w", err)
	}
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k.ID] = k.Project
	}
	return out, nil
}

// serveFiltered serves a list route and keeps only the tenant's entries:
// its keys, or the models allowed to it. A page of keys is asked for
// under the tenant's node of the tree, so every page is full and its
// next and total count only the tenant's keys.
func (h *Handler) serveFiltered(w http.ResponseWriter, r *http.Request, s *scope, access tenantAccess) error {
	if access == tenantKeys && llm.KeyPaging(r.URL.Query()) {
		q := r.URL.Query()
		if u := q.Get("under"); u == "" || (u != s.path && !strings.HasPrefix(u, s.path+"/")) {
			q.Set("under", s.path)
		}
		r = r.Clone(r.Context())
		r.URL.RawQuery = q.Encode()
	}
	rec := newRecorder()
	h.routes.ServeHTTP(rec, r)
	body := rec.body.Bytes()
	if rec.status == http.StatusOK {
		keep := func(it json.RawMessage) bool {
			var e struct {
				Name, Project string
				Aliases       []string
			}
			if json.Unmarshal(it, &e) != nil {
				return false
			}
			return (access == tenantKeys && s.holds("project", e.Project)) ||
				(access == tenantModels && s.allows(append([]string{e.Name}, e.Aliases...)...))
		}
		filter := func(items []json.RawMessage) []json.RawMessage {
			kept := []json.RawMessage{}
			for _, it := range items {
				if keep(it) {
					kept = append(kept, it)
				}
			}
			return kept
		}
		var items []json.RawMessage
		var page struct {
			Keys  []json.RawMessage `json:"keys"`
			Next  string            `json:"next"`
			Total int               `json:"total"`
		}
		switch {
		case json.Unmarshal(body, &items) == nil:
			body, _ = json.Marshal(filter(items))
		case access == tenantKeys && json.Unmarshal(body, &page) == nil:
			page.Keys = filter(page.Keys)
			body, _ = json.Marshal(page)
		default:
			return writeAPIError(w, fmt.Errorf("filtering %s: the answer is neither a list nor a page of keys", r.URL.Path))
		}
		body = append(body, '\n')
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Del("Content-Length")
	w.WriteHeader(rec.status)
	_, err := w.Write(body)
	return err
}
