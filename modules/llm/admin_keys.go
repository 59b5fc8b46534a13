package llm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"go.uber.org/zap"
)

func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

func handleKeys(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		if !KeyPaging(q) {
			return writeJSON(w, a.keyInfos())
		}
		page, err := pageKeys(a.keyInfos(), q)
		if err != nil {
			return err
		}
		return writeJSON(w, page)
	case http.MethodPost:
		return a.createKey(w, r)
	}
	return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET or POST", r.Method)
}

// KeyPaging says whether a GET /llm/keys asks for a page; without any of
// its parameters the answer is the whole list, as before.
func KeyPaging(q url.Values) bool {
	return q.Has("limit") || q.Has("after") || q.Has("q") || q.Has("under")
}

const (
	defaultKeyPage = 50
	maxKeyPage     = 1000
)

// pageKeys cuts a page from keys, sorted by id.
func pageKeys(keys []llmapi.KeyInfo, q url.Values) (llmapi.KeyPage, error) {
	limit := defaultKeyPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxKeyPage {
			return llmapi.KeyPage{}, apiErr(http.StatusBadRequest, "limit %q: use a number of keys from 1 to %d", v, maxKeyPage)
		}
		limit = n
	}
	after, under := q.Get("after"), q.Get("under")
	filter := strings.ToLower(q.Get("q"))
	page := llmapi.KeyPage{Keys: []llmapi.KeyInfo{}}
	for _, k := range keys {
		if under != "" && k.Project != under && !strings.HasPrefix(k.Project, under+"/") {
			continue
		}
		if filter != "" && !strings.Contains(strings.ToLower(k.ID), filter) && !strings.Contains(strings.ToLower(k.Project), filter) {
			continue
		}
		page.Total++
		if after != "" && k.ID <= after {
			continue
		}
		if len(page.Keys) == limit {
			page.Next = page.Keys[limit-1].ID
			continue
		}
		page.Keys = append(page.Keys, k)
	}
	return page, nil
}

// maxKeyBody bounds the bodies of the key routes: an id, a project and
// limits with lists of models and tools.
const maxKeyBody = 64 << 10

func (a *App) createKey(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID      string          `json:"id"`
		Project string          `json:"project"`
		Limits  *tenancy.Limits `json:"limits"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeyBody)).Decode(&req); err != nil {
		return apiErr(http.StatusBadRequest, "the body must be JSON like {\"project\":\"org/team/project\"}, at most %d bytes: %v", maxKeyBody, err)
	}
	if req.ID == "" {
		req.ID = "key-" + fleet.RandID()
	}
	if err := catalog.CheckID("key id", req.ID); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	secret, err := tenancy.NewSecret()
	if err != nil {
		return err
	}
	key := &tenancy.APIKey{ID: req.ID, SHA256: tenancy.HashKey(secret), Limits: req.Limits, Project: req.Project, Created: now().UTC()}
	err = a.changeKeys(r.Context(), func(keys []*tenancy.APIKey) ([]*tenancy.APIKey, error) {
		if !a.keys.Load().HasProject(req.Project) {
			return nil, apiErr(http.StatusBadRequest, "project %q is not declared; use organisation/team/project as in the config", req.Project)
		}
		if _, dup := a.keys.Load().Key(req.ID); dup {
			return nil, apiErr(http.StatusConflict, "a key with id %q exists", req.ID)
		}
		return append(keys, key), nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.audit(r, "key created", zap.String("key", key.ID), zap.String("project", key.Project))
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, llmapi.KeyInfo{ID: key.ID, Project: key.Project, Source: "runtime", Created: key.Created, Limits: key.Limits, Secret: secret})
}

func handleKey(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	rest := strings.TrimPrefix(r.URL.Path, "/llm/keys/")
	id, action, _ := strings.Cut(rest, "/")
	if err := catalog.CheckID("key id", id); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	switch {
	case r.Method == http.MethodGet && action == "":
		for _, k := range a.keyInfos() {
			if k.ID == id {
				return writeJSON(w, k)
			}
		}
		return apiErr(http.StatusNotFound, "no key %q", id)
	case r.Method == http.MethodDelete && action == "":
		return a.revokeKey(w, r, id)
	case r.Method == http.MethodPost && action == "rotate":
		return a.rotateKey(w, r, id)
	case r.Method == http.MethodPut && action == "limits":
		return a.setKeyLimits(w, r, id)
	}
	return apiErr(http.StatusMethodNotAllowed, "use GET or DELETE /llm/keys/<id>, POST /llm/keys/<id>/rotate or PUT /llm/keys/<id>/limits")
}

// runtimeKey finds a key created through the API in keys, or explains why
// it cannot be changed here.
func (a *App) runtimeKey(keys []*tenancy.APIKey, id string) (*tenancy.APIKey, error) {
	for _, k := range keys {
		if k.ID == id {
			return k, nil
		}
	}
	if _, ok := a.keys.Load().Key(id); ok {
		return nil, apiErr(http.StatusConflict, "key %q is declared in the config file; change it there", id)
	}
	return nil, apiErr(http.StatusNotFound, "no key %q", id)
}

func (a *App) revokeKey(w http.ResponseWriter, r *http.Request, id string) error {
	err := a.changeKeys(r.Context(), func(keys []*tenancy.APIKey) ([]*tenancy.APIKey, error) {
		k, err := a.runtimeKey(keys, id)
		if err != nil {
			return nil, err
		}
		if k.Revoked == nil {
			t := now().UTC()
			k.Revoked = &t
		}
		return keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.audit(r, "key revoked", zap.String("key", id))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *App) rotateKey(w http.ResponseWriter, r *http.Request, id string) error {
	secret, err := tenancy.NewSecret()
	if err != nil {
		return err
	}
	var info llmapi.KeyInfo
	err = a.changeKeys(r.Context(), func(keys []*tenancy.APIKey) ([]*tenancy.APIKey, error) {
		k, err := a.runtimeKey(keys, id)
		if err != nil {
			return nil, err
		}
		if k.Revoked != nil {
			return nil, apiErr(http.StatusConflict, "key %q is revoked; create a new one", id)
		}
		k.SHA256, k.Created = tenancy.HashKey(secret), now().UTC()
		info = llmapi.KeyInfo{ID: k.ID, Project: k.Project, Source: "runtime", Created: k.Created, Limits: k.Limits, Secret: secret}
		return keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	a.audit(r, "key rotated", zap.String("key", id))
	return writeJSON(w, info)
}

// setKeyLimits replaces a runtime key's limits.
func (a *App) setKeyLimits(w http.ResponseWriter, r *http.Request, id string) error {
	var l tenancy.Limits
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return apiErr(http.StatusBadRequest, "the body must be the key's limits as JSON, such as {\"requests_per_minute\":60,\"tokens_per_minute\":100000} ({} removes them), at most %d bytes: %v", maxKeyBody, err)
	}
	if err := l.Validate(); err != nil {
		return apiErr(http.StatusBadRequest, "key %q: %v", id, err)
	}
	var info llmapi.KeyInfo
	err := a.changeKeys(r.Context(), func(keys []*tenancy.APIKey) ([]*tenancy.APIKey, error) {
		k, err := a.runtimeKey(keys, id)
		if err != nil {
			return nil, err
		}
		if k.Revoked != nil {
			return nil, apiErr(http.StatusConflict, "key %q is revoked; create a new one", id)
		}
		k.Limits = &l
		if b, _ := json.Marshal(l); string(b) == "{}" {
			k.Limits = nil // none of its own
		}
		return keys, nil
	})
	if err != nil {
		return asAPIError(err)
	}
	for _, k := range a.keyInfos() {
		if k.ID == id {
			info = k
		}
	}
	a.audit(r, "key limits changed", zap.String("key", id), zap.Any("limits", l))
	return writeJSON(w, info)
}

func asAPIError(err error) error {
	if _, ok := err.(caddy.APIError); ok {
		return err
	}
	return apiErr(http.StatusBadRequest, "%v", err)
}

// getUsage answers GET /llm/usage?org=|team=|project=|key=…&from=&to= with
// usage by model. from and to are RFC 3339; default the last 24 hours.
func getUsage(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var node string
	for _, k := range []string{"org", "team", "project", "key"} {
		if v := q.Get(k); v != "" {
			node = k[:1] + ":" + v
		}
	}
	if node == "" {
		return apiErr(http.StatusBadRequest, "name a node: ?org=, ?team=org/team, ?project=org/team/project or ?key=<id>")
	}
	to, from := now().UTC(), now().UTC().Add(-24*time.Hour)
	for name, dst := range map[string]*time.Time{"from": &from, "to": &to} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return apiErr(http.StatusBadRequest, "%s=%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", name, v)
			}
			*dst = t
		}
	}
	models := map[string]*llmapi.Usage{}
	var rerr error
	read := map[UsageReader]bool{} // handlers that share a store (two sites, a reload) read it once
	a.shared.usageReaders.Range(func(_, v any) bool {
		if read[v.(UsageReader)] {
			return true
		}
		read[v.(UsageReader)] = true
		got, err := v.(UsageReader).ReadUsage(node, from, to)
		if err != nil {
			rerr = err
			return false
		}
		for m, u := range got {
			if models[m] == nil {
				models[m] = &llmapi.Usage{}
			}
			models[m].Add(*u)
		}
		return true
	})
	if rerr != nil {
		return apiErr(http.StatusBadGateway, "reading usage: %v", rerr)
	}
	var total llmapi.Usage
	for _, u := range models {
		total.Add(*u)
	}
	return writeJSON(w, map[string]any{"node": node, "from": from, "to": to, "models": models, "total": total})
}

// getCacheStats answers GET /llm/cache: each cache's entries and outcomes.
func getCacheStats(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	out := []any{}
	a.shared.caches.Range(func(_, v any) bool {
		out = append(out, v.(CacheAdmin).CacheStats())
		return true
	})
	return writeJSON(w, out)
}

// purgeCache answers POST /llm/cache/purge {"model":…,"scope":…}.
func purgeCache(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return apiErr(http.StatusMethodNotAllowed, "use POST /llm/cache/purge with {\"model\":…,\"scope\":…}")
	}
	var req struct{ Model, Scope string }
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxKeyBody)).Decode(&req); err != nil {
			return apiErr(http.StatusBadRequest, "the body must be JSON like {\"model\":\"chat\",\"scope\":\"p:acme/research/alpha\"}, at most %d bytes: %v", maxKeyBody, err)
		}
	}
	a, err := running()
	if err != nil {
		return err
	}
	n := 0
	a.shared.caches.Range(func(_, v any) bool {
		n += v.(CacheAdmin).Purge(req.Model, req.Scope)
		return true
	})
	a.audit(r, "cache purged", zap.String("model", req.Model), zap.String("scope", req.Scope), zap.Int("entries", n))
	return writeJSON(w, map[string]int{"purged": n})
}
