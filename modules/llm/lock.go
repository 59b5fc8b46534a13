//go:build unix

package llm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/caddyserver/caddy/v2"
)

// One llmgw runs per data directory. The llm app takes an exclusive
// flock on llmgw.lock there when it starts, and writes its pid into it;
// a second llmgw with the same data directory refuses to start, naming
// the first. (Caddy binds its ports with SO_REUSEPORT, so without this
// both would run and split the traffic.) The lock lives in a UsagePool,
// so a reload in the same process keeps it; it is released when the
// last config of the llm app is cleaned up, or when the process exits.

const lockFileName = "llmgw.lock"

var dataLocks = caddy.NewUsagePool()

// dataLock is the open, locked file.
type dataLock struct{ f *os.File }

func (l *dataLock) Destruct() error {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}

// lockDataDir takes (or, in the same process, shares) the data
// directory's lock.
func (a *App) lockDataDir() error {
	path := filepath.Join(caddy.AppDataDir(), lockFileName)
	if _, _, err := dataLocks.LoadOrNew(path, func() (caddy.Destructor, error) { return takeLock(path) }); err != nil {
		return err
	}
	a.lockKey = path
	return nil
}

// unlockDataDir releases this config's hold on the lock.
func (a *App) unlockDataDir() {
	if a.lockKey != "" {
		_, _ = dataLocks.Delete(a.lockKey)
		a.lockKey = ""
	}
}

func takeLock(path string) (*dataLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("making the data directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(b))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("another llmgw (pid %s) is running with the data directory %s (it holds %s); "+
				"stop it first, or give this one a data directory of its own (XDG_DATA_HOME)", pid, filepath.Dir(path), path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataLock{f: f}, nil
}
