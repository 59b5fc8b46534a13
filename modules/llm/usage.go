package llm

import (
	"sync"
	"time"
)

// Usage is what a tenancy node used of one model in a time range.
type Usage struct {
	Requests     int64 `json:"requests"`
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostMicros   int64 `json:"cost_micros"`
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	u.Requests += o.Requests
	u.InputTokens += o.InputTokens
	u.OutputTokens += o.OutputTokens
	u.CostMicros += o.CostMicros
}

// UsageReader reads recorded usage; llm_quota registers its store.
type UsageReader interface {
	// ReadUsage returns usage by model of a node ("o:acme", "t:acme/research",
	// "p:acme/research/alpha" or "k:<key id>") in hourly buckets that
	// overlap [from, to].
	ReadUsage(node string, from, to time.Time) (map[string]*Usage, error)
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
