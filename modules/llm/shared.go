package llm

import (
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/internal/adminroute"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// procShared is what the llm apps of one process share across reloads: the
// locks that serialize changes to stored keys and tenancy and to model
// versions, and the last update check of each model. It lives in a
// UsagePool, so a reload hands it from the old config to the new one.
type procShared struct {
	keysMu    sync.Mutex // runtime key and tenancy changes
	updatesMu sync.Mutex // updates and rollbacks of model versions
	checks    updateChecks

	// running is the llm app that started last and has not stopped: the
	// admin endpoint's routes, which Caddy calls without a context of
	// their own, answer for it (runningApp).
	running atomic.Pointer[App]

	usageReaders sync.Map            // id → UsageReader (usage.go)
	sessions     sync.Map            // id → SessionAuth (usage.go)
	caches       sync.Map            // id → CacheAdmin (usage.go)
	chargers     sync.Map            // id → Charger (charge.go)
	handlers     adminroute.Registry // prefix → the handler of /llm/<prefix>/ (openapi.go)
}

// sharedPool holds the process's one procShared value.
var sharedPool = caddy.NewUsagePool()

const sharedKey = "procShared"

// acquireShared takes the process's procShared value, making it on first use;
// releaseShared gives it back.
func acquireShared() *procShared {
	v, _, _ := sharedPool.LoadOrNew(sharedKey, func() (caddy.Destructor, error) {
		return &procShared{checks: updateChecks{last: map[string]llmapi.ModelUpdates{}}}, nil
	})
	return v.(*procShared)
}

func releaseShared() { _, _ = sharedPool.Delete(sharedKey) }

// Destruct lets the pool drop the value; nothing runs in it.
func (s *procShared) Destruct() error { return nil }

// updateChecks keeps the last update check of each model.
type updateChecks struct {
	mu   sync.Mutex
	last map[string]llmapi.ModelUpdates
}

func (c *updateChecks) get(model string) (llmapi.ModelUpdates, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.last[model]
	return u, ok
}

func (c *updateChecks) put(model string, u llmapi.ModelUpdates) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[model] = u
}

// keepOnly forgets the checks of the models keep rejects.
func (c *updateChecks) keepOnly(keep func(model string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.last {
		if !keep(name) {
			delete(c.last, name)
		}
	}
}

// runningApp is the llm app of the process that started last and has not
// stopped, or nil. Caddy replaces its admin server before it provisions a
// new config's apps, and a config that fails to start leaves the previous
// apps running, so only the apps themselves know which one answers.
func runningApp() *App {
	var a *App
	sharedPool.Range(func(_, v any) bool {
		a = v.(*procShared).running.Load()
		return false
	})
	return a
}
