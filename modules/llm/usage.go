package llm

import (
	"sync"
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

var usageReaders sync.Map // id → UsageReader

// RegisterUsageReader makes r's usage readable through the admin API until
// the returned function is called.
func RegisterUsageReader(id string, r UsageReader) func() {
	usageReaders.Store(id, r)
	return func() { usageReaders.CompareAndDelete(id, r) }
}

// CacheAdmin is what the admin API asks of a cache; llm_cache registers
// its entry store.
type CacheAdmin interface {
	CacheStats() any
	// Purge removes the entries of a model and/or scope ("" for any) and
	// says how many.
	Purge(model, scope string) int
}

var caches sync.Map // id → CacheAdmin

// RegisterCache makes a cache's stats and purge reachable through the
// admin API until the returned function is called.
func RegisterCache(id string, c CacheAdmin) func() {
	caches.Store(id, c)
	return func() { caches.CompareAndDelete(id, c) }
}
