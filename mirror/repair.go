package mirror

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.uber.org/zap"
)

// repairStores puts a file just fetched and verified at path into each
// store whose copy failed its check, so a fetch that finds damage leaves
// good copies behind, as a deep sync would.
func (c *Cache) repairStores(ctx context.Context, man Manifest, f File, key, path string, bad []Store) {
	for _, s := range bad {
		err := c.putLocal(ctx, s, man, f, key, path)
		fields := []zap.Field{zap.String("store", s.Name()), zap.String("model", man.Model),
			zap.String("version", man.Version), zap.String("file", f.Path)}
		if err != nil {
			c.m.log.Warn("could not replace a corrupt stored copy; sync --deep will try again", append(fields, zap.Error(err))...)
			continue
		}
		c.m.clearSuspect(s, key)
		c.m.log.Info("replaced a corrupt stored copy with the verified one", fields...)
	}
}

func (c *Cache) putLocal(ctx context.Context, s Store, man Manifest, f File, key, path string) error {
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	t := c.m.tr.start(&Transfer{Kind: "copy", Model: man.Model, Version: man.Version, File: f.Path, Store: s.Name(), Total: f.Size})
	defer c.m.tr.end(t)
	_, err = s.Put(ctx, key, src, f.Size, f.SHA256, t)
	return err
}

// Recheck reads every file of a version in the node cache and checks it
// against the manifest. A file that does not match is removed, with the
// mark that says the version is complete, so that the next Fetch brings
// it again from a good store. It returns the files removed; a version
// not in the cache has none.
func (m *Mirror) Recheck(ctx context.Context, model, version string) ([]string, error) {
	c := m.cache
	if c == nil {
		return nil, errors.New("the mirror has no node cache; set cache in the mirror block")
	}
	if err := CheckName("model", model); err != nil {
		return nil, err
	}
	if err := CheckName("version", version); err != nil {
		return nil, err
	}
	id := model + "/" + version
	dir := filepath.Join(c.dir, model, version)
	c.mu.Lock()
	man, ok := c.complete(dir)
	if _, busy := c.fetching[id]; busy || !ok {
		c.mu.Unlock()
		return nil, nil // arriving now, or not here: Fetch checks every byte
	}
	done := make(chan struct{})
	c.fetching[id] = done // no Fetch starts on it meanwhile
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.fetching, id)
		c.mu.Unlock()
		close(done)
	}()
	var bad []string
	for _, f := range man.Files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := checkLocal(ctx, p, f); err != nil {
			if ctx.Err() != nil {
				return bad, ctx.Err()
			}
			m.log.Warn("the node cache's copy does not match its manifest; fetching it again", zap.String("model", model),
				zap.String("version", version), zap.String("file", f.Path), zap.Error(err))
			if len(bad) == 0 {
				if err := os.Remove(filepath.Join(dir, completeFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return bad, err
				}
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return bad, err
			}
			bad = append(bad, f.Path)
		}
	}
	return bad, nil
}

// checkLocal hashes a local file and compares it with the manifest.
func checkLocal(ctx context.Context, path string, f File) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	h, want, algo := f.checker()
	n, err := io.Copy(h, ctxReader{ctx, in})
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); n != f.Size || got != want {
		return fmt.Errorf("%s: got %d bytes with %s %s, want %d with %s: %w", f.Path, n, algo, got, f.Size, want, ErrChecksum)
	}
	return nil
}
