package llm

import (
	"fmt"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// UsageReader reads recorded usage; llm_quota registers its store.
type UsageReader interface {
	// ReadUsage returns usage by model of a node ("o:acme", "t:acme/research",
	// "p:acme/research/alpha" or "k:<key id>") in hourly buckets that
	// overlap [from, to].
	ReadUsage(node string, from, to time.Time) (map[string]*llmapi.Usage, error)
}

// RegisterUsageReader makes r's usage readable through the admin API until
// the returned function is called. The readers are the process's: a
// reader registered by a handler of the previous config stays until that
// handler is cleaned up.
func (a *App) RegisterUsageReader(id string, r UsageReader) func() {
	a.shared.usageReaders.Store(id, r)
	return func() { a.shared.usageReaders.CompareAndDelete(id, r) }
}

// SessionAuth authenticates a console session on a request to /v1 (the
// console's playground); llm_admin registers its sessions. A request is
// the session's only with its cookie and its CSRF token (X-CSRF-Token).
type SessionAuth interface {
	// SessionCaller returns the session's caller and, for a tenant
	// admin, the node it manages; ok is false for a request without a
	// live session, err says why a session may not use models.
	SessionCaller(r *http.Request) (c Caller, node string, ok bool, err error)
}

// RegisterSessions makes s's sessions usable on /v1 until the returned
// function is called.
func (a *App) RegisterSessions(id string, s SessionAuth) func() {
	a.shared.sessions.Store(id, s)
	return func() { a.shared.sessions.CompareAndDelete(id, s) }
}

// SessionTenant is the tenant a request made with a console session acts
// as: console:<actor>, at the limits of the tenant admin's node, or
// without limits for the gateway's staff. ok is false when no session is
// on the request.
func (a *App) SessionTenant(r *http.Request) (t *tenancy.Tenant, ok bool, err error) {
	a.shared.sessions.Range(func(_, v any) bool {
		var c Caller
		var node string
		if c, node, ok, err = v.(SessionAuth).SessionCaller(r); !ok || err != nil {
			return err == nil
		}
		if t, ok = a.keys.Load().NodeTenant("console:"+c.Actor, node); !ok {
			err = fmt.Errorf("%s manages %s, which has no project, so no limits to count at; add a project to it", c.Actor, node)
		}
		return false
	})
	return t, ok, err
}

// CacheAdmin is what the admin API asks of a cache; llm_cache registers
// its entry store.
type CacheAdmin interface {
	CacheStats() any
	// Purge removes the entries of a model and/or scope ("" for any) and
	// says how many.
	Purge(model, scope string) int
}

// RegisterCache makes a cache's stats and purge reachable through the
// admin API until the returned function is called.
func (a *App) RegisterCache(id string, c CacheAdmin) func() {
	a.shared.caches.Store(id, c)
	return func() { a.shared.caches.CompareAndDelete(id, c) }
}
