//go:build unix

package datalock

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

const lockFileName = "llmgw.lock"

var dataLocks = caddy.NewUsagePool()

// dataLock is the open, locked file.
type dataLock struct{ f *os.File }

func (l *dataLock) Destruct() error {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	return l.f.Close()
}

// Take takes (or, in the same process, shares) the lock of the data
// directory dir; Release gives this hold back.
func Take(dir string) error {
	path := filepath.Join(dir, lockFileName)
	_, _, err := dataLocks.LoadOrNew(path, func() (caddy.Destructor, error) { return takeLock(path) })
	return err
}

// Release gives back a hold Take took on dir's lock; the last one unlocks.
func Release(dir string) { _, _ = dataLocks.Delete(filepath.Join(dir, lockFileName)) }

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
