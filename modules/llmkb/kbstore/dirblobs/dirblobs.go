// Package dirblobs keeps the knowledge bases' file bytes in a directory
// (Caddy's data directory/llm/kb/files when no S3 store is configured):
// one file per id, written to a temporary file, synced, then renamed, so
// that a crash leaves the old bytes or the new ones, never a mix.
package dirblobs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// Blobs is a directory of blobs. It implements kbstore.Blobs.
type Blobs struct {
	dir string
}

// Open returns the blobs in dir, creating it.
func Open(dir string) (*Blobs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("knowledge base files: creating %s: %w; check the data directory's permissions", dir, err)
	}
	return &Blobs{dir: dir}, nil
}

// checkID refuses an id that is not a plain file name: the gateway makes
// ids ("file-…"), but one that named a path could reach outside dir.
func checkID(id string) error {
	if id == "" || id == "." || strings.HasPrefix(id, ".") || strings.Contains(id, "..") ||
		strings.ContainsAny(id, "/\\\x00") {
		return fmt.Errorf("knowledge base files: invalid file id %q: an id is a plain name without path separators, \"..\" or a leading dot", id)
	}
	return nil
}

// PutBlob writes data under id.
func (b *Blobs) PutBlob(ctx context.Context, id string, data []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("knowledge base files: writing %s: %w", id, err)
	}
	if err := b.write(id, data); err != nil {
		return fmt.Errorf("knowledge base files: writing %s in %s: %w; check the disk's free space and the directory's permissions", id, b.dir, err)
	}
	return nil
}

func (b *Blobs) write(id string, data []byte) error {
	tmp, err := os.CreateTemp(b.dir, ".tmp-"+id+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(b.dir, id))
	}
	if err == nil {
		err = syncDir(b.dir)
	}
	return err
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// GetBlob reads the bytes of id, kbstore.ErrNotFound when absent.
func (b *Blobs) GetBlob(ctx context.Context, id string) ([]byte, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("knowledge base files: reading %s: %w", id, err)
	}
	data, err := os.ReadFile(filepath.Join(b.dir, id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("knowledge base files: %s: %w", id, kbstore.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("knowledge base files: reading %s in %s: %w", id, b.dir, err)
	}
	return data, nil
}

// DeleteBlob deletes the bytes of id; an absent id is no error.
func (b *Blobs) DeleteBlob(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("knowledge base files: deleting %s: %w", id, err)
	}
	err := os.Remove(filepath.Join(b.dir, id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("knowledge base files: deleting %s in %s: %w", id, b.dir, err)
	}
	return nil
}

// Interface guards
var _ kbstore.Blobs = (*Blobs)(nil)
