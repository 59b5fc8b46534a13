package llm

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/internal/datalock"
)

// lockDataDir takes (or, in the same process, shares) the data
// directory's lock: one llmgw runs per data directory.
func (a *App) lockDataDir() error {
	if err := datalock.Take(caddy.AppDataDir()); err != nil {
		return err
	}
	a.lockKey = caddy.AppDataDir()
	return nil
}

// unlockDataDir releases this config's hold on the lock.
func (a *App) unlockDataDir() {
	if a.lockKey != "" {
		datalock.Release(a.lockKey)
		a.lockKey = ""
	}
}
