package mirror

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"
)

// completeFile marks a version whose files are all fetched and verified;
// its modification time orders eviction (least recently used first).
const completeFile = ".complete"

// Cache is the node's local copy of the versions its replicas use.
type Cache struct {
	m     *Mirror
	dir   string
	limit int64

	mu       sync.Mutex
	inUse    map[string]int
	fetching map[string]chan struct{}
}

func newCache(m *Mirror, dir string, limit int64) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("node cache: %w", err)
	}
	return &Cache{m: m, dir: dir, limit: limit, inUse: map[string]int{}, fetching: map[string]chan struct{}{}}, nil
}

// Fetched is a version in the node cache, held until Release.
type Fetched struct {
	Dir      string
	Manifest Manifest
	release  func()
}

// Path is the local path of one of the version's files.
func (f *Fetched) Path(file string) string { return filepath.Join(f.Dir, filepath.FromSlash(file)) }

// Release says the version is no longer used, so it may be evicted.
func (f *Fetched) Release() {
	if f.release != nil {
		f.release()
		f.release = nil
	}
}

// Fetch brings a version (the current one if version is empty) to the node
// cache from whichever store answers: each file goes to a temp file, is
// checked against the manifest's sha256 and renamed. A store whose copy
// does not match is marked bad and the next one is tried; bytes that do not
// match are never handed out. The version stays in the cache, safe from
// eviction, until Release.
func (m *Mirror) Fetch(ctx context.Context, model, version string) (*Fetched, error) {
	c := m.cache
	if c == nil {
		return nil, errors.New("the mirror has no node cache; set cache in the mirror block")
	}
	if version == "" {
		v, err := m.Current(ctx, model)
		if err != nil {
			// No store answers: the node's newest complete copy serves.
			cv, ok := c.newest(model)
			if !ok {
				return nil, err
			}
			m.log.Warn("stores unreachable; using the version in the node cache", zap.String("model", model), zap.String("version", cv), zap.Error(err))
			v = cv
		}
		version = v
	}
	if err := CheckName("model", model); err != nil {
		return nil, err
	}
	if err := CheckName("version", version); err != nil {
		return nil, err
	}
	id := model + "/" + version
	dir := filepath.Join(c.dir, model, version)
	for {
		c.mu.Lock()
		if man, ok := c.complete(dir); ok {
			c.inUse[id]++
			c.mu.Unlock()
			now := now()
			_ = os.Chtimes(filepath.Join(dir, completeFile), now, now)
			return &Fetched{Dir: dir, Manifest: man, release: c.releaser(id)}, nil
		}
		wait, busy := c.fetching[id]
		if !busy {
			done := make(chan struct{})
			c.fetching[id] = done
			c.inUse[id]++ // keep it from eviction while it arrives
			c.mu.Unlock()
			man, err := c.fetch(ctx, model, version, dir)
			c.mu.Lock()
			delete(c.fetching, id)
			if err != nil {
				c.inUse[id]--
				if c.inUse[id] == 0 {
					delete(c.inUse, id)
				}
			}
			c.mu.Unlock()
			close(done)
			if err != nil {
				return nil, err
			}
			return &Fetched{Dir: dir, Manifest: man, release: c.releaser(id)}, nil
		}
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (c *Cache) releaser(id string) func() {
	return func() {
		c.mu.Lock()
		c.inUse[id]--
		if c.inUse[id] <= 0 {
			delete(c.inUse, id)
		}
		c.mu.Unlock()
	}
}

// complete reads the manifest of a fully fetched version.
func (c *Cache) complete(dir string) (Manifest, bool) {
	var man Manifest
	data, err := os.ReadFile(filepath.Join(dir, completeFile))
	if err != nil || json.Unmarshal(data, &man) != nil {
		return man, false
	}
	return man, true
}

func (c *Cache) fetch(ctx context.Context, model, version, dir string) (Manifest, error) {
	man, err := c.m.Show(ctx, model, version)
	if err != nil {
		return man, err
	}
	if err := c.makeRoom(man.Size(), model+"/"+version); err != nil {
		return man, err
	}
	for _, f := range man.Files {
		if err := c.fetchFile(ctx, man, f, filepath.Join(dir, filepath.FromSlash(f.Path))); err != nil {
			return man, err
		}
	}
	data, _ := json.Marshal(man)
	if err := os.WriteFile(filepath.Join(dir, completeFile), data, 0o644); err != nil {
		return man, err
	}
	c.m.log.Info("version fetched to node cache", zap.String("model", model), zap.String("version", version), zap.Int64("bytes", man.Size()))
	return man, nil
}

// fetchFile gets one file from the first store with a good copy. A partial
// temp file from an earlier try is resumed.
func (c *Cache) fetchFile(ctx context.Context, man Manifest, f File, dest string) error {
	if fi, err := os.Stat(dest); err == nil && fi.Size() == f.Size {
		return nil // renamed into place only after it was verified
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	key := fileKey(man.Model, man.Version, f.Path)
	part := dest + ".part"
	var errs []error
	var bad []Store // stores whose copy failed a check: repaired from the good one
	for _, s := range c.m.stores {
		if c.m.isSuspect(s, key) {
			errs = append(errs, fmt.Errorf("store %s: its copy of %s failed a check", s.Name(), f.Path))
			bad = append(bad, s)
			continue
		}
		err := c.fetchFrom(ctx, s, man, f, key, part)
		if err == nil {
			if err := os.Rename(part, dest); err != nil {
				return err
			}
			c.repairStores(ctx, man, f, key, dest, bad)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, ErrChecksum) {
			bad = append(bad, s)
			c.m.markSuspect(s, key)
			c.m.log.Error("stored file is corrupt; trying another store", zap.String("store", s.Name()),
				zap.String("model", man.Model), zap.String("version", man.Version), zap.String("file", f.Path))
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("fetching %s/%s %s: %w", man.Model, man.Version, f.Path, errors.Join(errs...))
}

func (c *Cache) fetchFrom(ctx context.Context, s Store, man Manifest, f File, key, part string) error {
	out, err := os.OpenFile(part, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	h, want, algo := f.checker()
	have, err := io.Copy(h, out) // the bytes of an earlier try
	if err != nil {
		return err
	}
	if have > f.Size {
		if err := out.Truncate(0); err != nil {
			return err
		}
		h.Reset()
		have = 0
		if _, err := out.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	t := c.m.tr.start(&Transfer{Kind: "fetch", Model: man.Model, Version: man.Version, File: f.Path, Store: s.Name(), Total: f.Size})
	defer c.m.tr.end(t)
	t.Add(have)
	stop := c.m.logProgress(t)
	defer stop()
	if have < f.Size {
		rc, err := s.Open(ctx, key, have)
		if err != nil {
			return err
		}
		_, err = pipeCopy(ctx, out, h, t, io.LimitReader(rc, f.Size-have))
		rc.Close()
		if err != nil {
			return fmt.Errorf("store %s: reading %s: %w", s.Name(), key, err)
		}
	}
	if err := out.Sync(); err != nil { // durable before it is renamed into place
		return err
	}
	got := hex.EncodeToString(h.Sum(nil))
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != f.Size || got != want {
		os.Remove(part)
		return fmt.Errorf("store %s: %s: got %d bytes with %s %s, want %d with %s: %w", s.Name(), f.Path, fi.Size(), algo, got, f.Size, want, ErrChecksum)
	}
	return nil
}

// CachedVersion is a version in the node cache.
type CachedVersion struct {
	Model    string `json:"model"`
	Version  string `json:"version"`
	Size     int64  `json:"size"`
	InUse    int    `json:"in_use"`
	Complete bool   `json:"complete"`
	used     int64
}

// Cached lists the versions in the node cache, least recently used first.
func (m *Mirror) Cached() ([]CachedVersion, error) {
	if m.cache == nil {
		return nil, nil
	}
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	return m.cache.scan()
}

func (c *Cache) scan() ([]CachedVersion, error) {
	var out []CachedVersion
	models, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	for _, md := range models {
		if !md.IsDir() || strings.HasPrefix(md.Name(), ".") {
			continue
		}
		versions, _ := os.ReadDir(filepath.Join(c.dir, md.Name()))
		for _, vd := range versions {
			if !vd.IsDir() {
				continue
			}
			dir := filepath.Join(c.dir, md.Name(), vd.Name())
			cv := CachedVersion{Model: md.Name(), Version: vd.Name(), InUse: c.inUse[md.Name()+"/"+vd.Name()]}
			if fi, err := os.Stat(filepath.Join(dir, completeFile)); err == nil {
				cv.Complete, cv.used = true, fi.ModTime().UnixNano()
			}
			_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if fi, err := d.Info(); err == nil {
						cv.Size += fi.Size()
					}
				}
				return nil
			})
			out = append(out, cv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].used < out[j].used })
	return out, nil
}

// makeRoom evicts least recently used versions no replica uses until need
// more bytes fit under the limit.
func (c *Cache) makeRoom(need int64, forID string) error {
	if c.limit <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list, err := c.scan()
	if err != nil {
		return err
	}
	var used, pinned int64
	for _, cv := range list {
		if cv.Model+"/"+cv.Version == forID {
			need -= cv.Size // partly fetched already
			continue
		}
		used += cv.Size
		if cv.InUse > 0 {
			pinned += cv.Size
		}
	}
	if pinned+need > c.limit {
		return fmt.Errorf("node cache is too small for %s (%s): %s of its %s are versions in use; raise the cache size or stop a model",
			forID, humanize.IBytes(uint64(need)), humanize.IBytes(uint64(pinned)), humanize.IBytes(uint64(c.limit)))
	}
	for _, cv := range list {
		if used+need <= c.limit {
			break
		}
		if cv.InUse > 0 || cv.Model+"/"+cv.Version == forID {
			continue
		}
		if err := os.RemoveAll(filepath.Join(c.dir, cv.Model, cv.Version)); err != nil {
			return err
		}
		_ = os.Remove(filepath.Join(c.dir, cv.Model))
		used -= cv.Size
		c.m.log.Info("version evicted from node cache", zap.String("model", cv.Model), zap.String("version", cv.Version), zap.Int64("bytes", cv.Size))
	}
	return nil
}

// newest is the most recently used complete version of model in the cache.
func (c *Cache) newest(model string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	list, err := c.scan()
	if err != nil {
		return "", false
	}
	best := ""
	for _, cv := range list { // least recently used first
		if cv.Model == model && cv.Complete {
			best = cv.Version
		}
	}
	return best, best != ""
}

// evictVersion drops a removed version from the cache unless it is in use.
func (c *Cache) evictVersion(model, version string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.inUse[model+"/"+version] > 0 {
		return
	}
	_ = os.RemoveAll(filepath.Join(c.dir, model, version))
	_ = os.Remove(filepath.Join(c.dir, model))
}

// pipeCopy copies src to dst and feeds sum with the same bytes: one
// goroutine reads, and each buffer it fills is written and hashed at the
// same time, through a few 1 MiB buffers, so a fetch runs at the speed of
// the slowest stage, not of their sum.
func pipeCopy(ctx context.Context, dst io.Writer, sum io.Writer, t *Transfer, src io.Reader) (int64, error) {
	const nbuf, size = 6, 1 << 20
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	free := make(chan []byte, nbuf)
	for range nbuf {
		free <- make([]byte, size)
	}
	toWrite := make(chan []byte, nbuf)
	toHash := make(chan []byte, nbuf)
	written := make(chan []byte, nbuf) // buffers written, waiting for their hash
	hashed := make(chan []byte, nbuf)  // buffers hashed, in the same order
	var readErr error
	go func() {
		defer close(toWrite)
		defer close(toHash)
		for {
			if err := ctx.Err(); err != nil {
				readErr = err
				return
			}
			var b []byte
			select {
			case b = <-free:
			case <-ctx.Done():
				readErr = ctx.Err()
				return
			}
			n, err := io.ReadFull(src, b)
			if n > 0 {
				toWrite <- b[:n]
				toHash <- b[:n]
			} else {
				free <- b
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	go func() {
		defer close(hashed)
		for b := range toHash {
			sum.Write(b)
			hashed <- b
		}
	}()
	// A buffer is free again once it is both written and hashed; both
	// stages take buffers in the order they were read.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for b := range written {
			<-hashed
			free <- b[:cap(b)]
		}
		for range hashed {
		}
	}()
	var n int64
	var writeErr error
	for b := range toWrite {
		if writeErr == nil {
			var w int
			w, writeErr = dst.Write(b)
			n += int64(w)
			t.Add(int64(w))
			if writeErr != nil {
				cancel() // the reader stops at its next buffer
			}
		}
		written <- b
	}
	close(written)
	<-done
	if writeErr != nil {
		return n, writeErr
	}
	return n, readErr
}

// CacheEntry is one thing in the node cache: a version's directory
// (Model and Version set) or a stray file or directory that is no version
// (a file beside the versions, a model directory's own files).
type CacheEntry struct {
	// Path is relative to the cache directory, with slashes.
	Path    string `json:"path"`
	Model   string `json:"model,omitempty"`
	Version string `json:"version,omitempty"`
	Size    int64  `json:"size"`
	Files   int    `json:"files"`
	// Complete is a version fetched and verified whole.
	Complete bool `json:"complete,omitempty"`
	// Held is a version a replica holds or a fetch is bringing in now.
	Held bool `json:"held,omitempty"`
}

// CacheDir is the node cache's directory, or "" without one.
func (m *Mirror) CacheDir() string {
	if m.cache == nil {
		return ""
	}
	return m.cache.dir
}

// CacheEntries lists the node cache: every version directory and every
// stray file or directory. Names starting with a dot are left out.
func (m *Mirror) CacheEntries() ([]CacheEntry, error) {
	if m.cache == nil {
		return nil, nil
	}
	m.cache.mu.Lock()
	defer m.cache.mu.Unlock()
	return m.cache.entries()
}

// PruneCache removes the entries of the node cache that keep does not
// want (keep is asked about versions; stray entries are never kept),
// never one a replica holds or a fetch is bringing in: the cache is locked
// meanwhile, so no fetch starts in between. With dryRun it removes
// nothing. It returns what it removed (or would).
func (m *Mirror) PruneCache(keep func(model, version string) bool, dryRun bool) ([]CacheEntry, error) {
	if m.cache == nil {
		return nil, nil
	}
	c := m.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	list, err := c.entries()
	if err != nil {
		return nil, err
	}
	var out []CacheEntry
	for _, e := range list {
		if e.Held || (e.Version != "" && keep(e.Model, e.Version)) {
			continue
		}
		if !dryRun {
			if err := os.RemoveAll(filepath.Join(c.dir, filepath.FromSlash(e.Path))); err != nil {
				return out, err
			}
			if e.Model != "" {
				_ = os.Remove(filepath.Join(c.dir, e.Model)) // only when empty
			}
			m.log.Info("left-over weights removed from the node cache", zap.String("path", e.Path), zap.Int64("bytes", e.Size))
		}
		out = append(out, e)
	}
	return out, nil
}

// entries lists the cache; c.mu must be held.
func (c *Cache) entries() ([]CacheEntry, error) {
	top, err := os.ReadDir(c.dir)
	if err != nil {
		return nil, err
	}
	var out []CacheEntry
	for _, md := range top {
		if strings.HasPrefix(md.Name(), ".") {
			continue
		}
		if !md.IsDir() {
			out = append(out, c.sized(CacheEntry{Path: md.Name()}))
			continue
		}
		versions, _ := os.ReadDir(filepath.Join(c.dir, md.Name()))
		for _, vd := range versions {
			rel := md.Name() + "/" + vd.Name()
			if strings.HasPrefix(vd.Name(), ".") {
				continue
			}
			if !vd.IsDir() {
				out = append(out, c.sized(CacheEntry{Path: rel}))
				continue
			}
			id := md.Name() + "/" + vd.Name()
			_, fetching := c.fetching[id]
			_, done := c.complete(filepath.Join(c.dir, md.Name(), vd.Name()))
			out = append(out, c.sized(CacheEntry{Path: rel, Model: md.Name(), Version: vd.Name(),
				Complete: done, Held: fetching || c.inUse[id] > 0}))
		}
	}
	return out, nil
}

// sized fills in the entry's size and file count.
func (c *Cache) sized(e CacheEntry) CacheEntry {
	_ = filepath.WalkDir(filepath.Join(c.dir, filepath.FromSlash(e.Path)), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				e.Size += fi.Size()
				e.Files++
			}
		}
		return nil
	})
	return e
}
