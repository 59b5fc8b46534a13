package llmquota

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// A memory store's usage (GET /llm/usage on a single node) is kept in
// Caddy storage, so that a restart loses at most a minute of it: saved
// each minute it changed and when the last config lets go of the store
// (a reload keeps the store itself), loaded when the store is made. The
// windows that limits count in (a minute, a day, a budget period) are not
// kept. In Redis usage is Redis's.

// usageKey is where a memory store keeps its usage in Caddy storage.
const usageKey = "llm/quota/usage.json"

// savedUsage is one hour's usage of a model at a tenancy node.
type savedUsage struct {
	Node  string `json:"node"`
	Hour  int64  `json:"hour"` // Unix hours
	Model string `json:"model"`
	llmapi.Usage
}

// usageFile is where a memory store saves its usage, and the lock that
// keeps two saves from writing out of turn.
type usageFile struct {
	mu      sync.Mutex
	storage certmagic.Storage
	logger  *zap.Logger
}

// persistUsage loads the usage saved in storage into m and has m save it
// there from now on.
func (m *memoryStore) persistUsage(storage certmagic.Storage, logger *zap.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := storage.Load(ctx, usageKey)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("loading the usage saved in storage (%s): %w", usageKey, err)
	}
	var saved []savedUsage
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &saved); err != nil {
			return fmt.Errorf("reading the usage saved in storage (%s): %w; move the file away to start again", usageKey, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range saved {
		n := m.node(s.Node)
		if n.ledger == nil {
			n.ledger = map[ledgerKey]*llmapi.Usage{}
		}
		k := ledgerKey{s.Hour, s.Model}
		if n.ledger[k] == nil {
			n.ledger[k] = &llmapi.Usage{}
		}
		n.ledger[k].Add(s.Usage)
	}
	m.file = &usageFile{storage: storage, logger: logger}
	return nil
}

// saveUsage writes m's usage to storage if it changed since the last
// save.
func (m *memoryStore) saveUsage() {
	f := m.file
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m.mu.Lock()
	if !m.usageChanged {
		m.mu.Unlock()
		return
	}
	m.usageChanged = false
	saved := []savedUsage{}
	for name, n := range m.nodes {
		for k, u := range n.ledger {
			saved = append(saved, savedUsage{Node: name, Hour: k.hour, Model: k.model, Usage: *u})
		}
	}
	m.mu.Unlock()
	raw, err := json.Marshal(saved)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = f.storage.Store(ctx, usageKey, raw)
	}
	if err != nil {
		m.mu.Lock()
		m.usageChanged = true // the next minute tries again
		m.mu.Unlock()
		f.logger.Error("saving usage to storage", zap.String("key", usageKey), zap.Error(err))
	}
}
