package llmcache

import (
	"sync"

	"github.com/llmgw/llmgw/modules/llm"
)

// A store is shared by every handler that names it, across reloads: Caddy
// provisions the new config before it cleans up the old one, so both hold
// the store for a moment. The admin API sees a store while any handler
// holds it.
var (
	registeredMu sync.Mutex
	registered   = map[*entries]*registration{}
)

type registration struct {
	holders    int
	unregister func()
}

// register makes s reachable through the admin API (GET /llm/cache,
// POST /llm/cache/purge) until every returned release has been called.
func register(app *llm.App, id string, s *entries) (release func()) {
	registeredMu.Lock()
	defer registeredMu.Unlock()
	r := registered[s]
	if r == nil {
		r = &registration{unregister: app.RegisterCache(id, s)}
		registered[s] = r
	}
	r.holders++
	var once sync.Once
	return func() {
		once.Do(func() {
			registeredMu.Lock()
			defer registeredMu.Unlock()
			if r.holders--; r.holders == 0 {
				r.unregister()
				delete(registered, s)
			}
		})
	}
}
