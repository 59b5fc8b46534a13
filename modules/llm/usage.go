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

// Node is the level's node name for counters and usage: its kind's
// initial, a colon and its name.
func (l *Level) Node() string { return l.Kind[:1] + ":" + l.Name }
