package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// DirStore keeps objects as files under a local directory. Writes go to a
// temporary file in the same directory and are renamed once verified.
type DirStore struct {
	name string
	root string
}

// NewDirStore opens (and creates) a directory store.
func NewDirStore(name, root string) (*DirStore, error) {
	if root == "" {
		return nil, fmt.Errorf("store %s: a directory store needs a path", name)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("store %s: %w", name, err)
	}
	return &DirStore{name: name, root: root}, nil
}

// Name implements Store.
func (s *DirStore) Name() string { return s.name }

func (s *DirStore) path(key string) (string, error) {
	clean := path.Clean("/" + key)[1:]
	if clean == "" || clean != key {
		return "", fmt.Errorf("store %s: invalid key %q", s.name, key)
	}
	return filepath.Join(s.root, filepath.FromSlash(clean)), nil
}

// Put implements Store.
func (s *DirStore) Put(ctx context.Context, key string, src io.ReaderAt, size int64, sum string, t *Transfer) (PutStats, error) {
	p, err := s.path(key)
	if err != nil {
		return PutStats{}, err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return PutStats{}, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return PutStats{}, err
	}
	defer os.Remove(tmp.Name())
	h := newSums()
	r := io.NewSectionReader(src, 0, size)
	n, err := io.Copy(io.MultiWriter(tmp, h, t.counter()), ctxReader{ctx, r})
	if err == nil && n != size {
		err = fmt.Errorf("source ended after %d of %d bytes", n, size)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return PutStats{}, fmt.Errorf("store %s: writing %s: %w", s.name, key, err)
	}
	got, b3 := h.hex()
	if sum != "" && got != sum {
		return PutStats{}, fmt.Errorf("store %s: %s: got sha256 %s, want %s: %w", s.name, key, got, sum, ErrChecksum)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return PutStats{}, err
	}
	return PutStats{PartsSent: 1, BytesSent: size, SHA256: got, BLAKE3: b3}, nil
}

// PutSmall implements Store.
func (s *DirStore) PutSmall(ctx context.Context, key string, data []byte) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

// Open implements Store.
func (s *DirStore) Open(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.wrap(key, err)
	}
	if off > 0 {
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// ReaderAt implements Store.
func (s *DirStore) ReaderAt(ctx context.Context, key string) (ReadAtCloser, error) {
	p, err := s.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, s.wrap(key, err)
	}
	return f, nil
}

// Stat implements Store.
func (s *DirStore) Stat(ctx context.Context, key string) (Object, error) {
	p, err := s.path(key)
	if err != nil {
		return Object{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Object{}, s.wrap(key, err)
	}
	return Object{Key: key, Size: fi.Size(), Modified: fi.ModTime()}, nil
}

// List implements Store.
func (s *DirStore) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	err := filepath.WalkDir(s.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed while walking
		}
		out = append(out, Object{Key: key, Size: fi.Size(), Modified: fi.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store %s: listing %s: %w", s.name, prefix, err)
	}
	return out, nil
}

// Delete implements Store.
func (s *DirStore) Delete(ctx context.Context, key string) error {
	p, err := s.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Drop directories left empty, up to the root.
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

// Ping implements Store.
func (s *DirStore) Ping(ctx context.Context) error {
	if _, err := os.Stat(s.root); err != nil {
		return &UnreachableError{Store: s.name, Err: err}
	}
	return nil
}

func (s *DirStore) wrap(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("store %s: %s: %w", s.name, key, ErrNotFound)
	}
	return fmt.Errorf("store %s: %w", s.name, err)
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Interface guards
var _ Store = (*DirStore)(nil)
