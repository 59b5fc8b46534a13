package llm

import (
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
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
