// Package userfiles lets the handler that keeps the files of /v1/files
// (llm_kb) lend them to other handlers (llm_jobs takes them as a job's
// input files), without either handler importing the other. The keeper
// registers a Reader; a borrower reads a project's file by its id.
package userfiles

import (
	"context"
	"errors"

	"github.com/caddyserver/caddy/v2"
)

// Reader reads the files a handler keeps.
type Reader interface {
	// ReadUserFile returns the file id of project: its name and bytes.
	// It returns ErrNotFound when project has no such file (another
	// project's, an expired one, or none).
	ReadUserFile(ctx context.Context, project, id string) (name string, data []byte, err error)
}

// ErrNotFound is a file the project does not have.
var ErrNotFound = errors.New("no such file")

// ErrNoStore is returned when no handler keeps files.
var ErrNoStore = errors.New("no handler keeps files on this gateway")

// readers are the registered Readers, by key; a pool, so that a reload
// hands them from the old config to the new one.
var readers = caddy.NewUsagePool()

type entry struct{ Reader }

func (entry) Destruct() error { return nil }

// Register makes r's files readable until the returned function is
// called; a second registration of key (a reload's) shares the first.
func Register(key string, r Reader) func() {
	_, _ = readers.LoadOrStore(key, entry{r})
	return func() { _, _ = readers.Delete(key) }
}

// Read reads file id of project from whichever registered Reader has
// it.
func Read(ctx context.Context, project, id string) (name string, data []byte, err error) {
	err = ErrNoStore
	readers.Range(func(_, v any) bool {
		n, d, e := v.(entry).ReadUserFile(ctx, project, id)
		switch {
		case e == nil:
			name, data, err = n, d, nil
			return false
		case errors.Is(e, ErrNotFound):
			err = ErrNotFound
		default:
			err = e
			return false
		}
		return true
	})
	return name, data, err
}
