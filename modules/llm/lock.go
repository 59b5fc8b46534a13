package llm

import (
	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/internal/buildinfo"
	"github.com/llmgw/llmgw/modules/internal/datalock"
	"github.com/llmgw/llmgw/modules/internal/statefmt"
)

// lockDataDir takes (or, in the same process, shares) the data
// directory's lock: one llmgw runs per data directory. Then it checks
// that no newer llmgw wrote the state there in a layout this one does
// not know (statefmt).
func (a *App) lockDataDir() error {
	if err := datalock.Take(caddy.AppDataDir()); err != nil {
		return err
	}
	if err := statefmt.CheckDir(caddy.AppDataDir(), buildinfo.Get().Version); err != nil {
		datalock.Release(caddy.AppDataDir())
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
