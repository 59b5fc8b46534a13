//go:build !unix

package llm

// Without flock the data directory is not locked.
func (a *App) lockDataDir() error { return nil }

func (a *App) unlockDataDir() {}
