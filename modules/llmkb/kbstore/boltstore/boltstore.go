// Package boltstore is the knowledge bases' embedded store: one bbolt
// file (Caddy's data directory/llm/kb/kb.db), for a gateway of one node.
//
// Records live in a bucket per kind ("record/file", "record/store", …),
// keyed by id. Chunks live in one bucket "chunks", keyed by store, NUL,
// file, NUL, and the sequence number as 4 big-endian bytes, so that a
// file's chunks and a store's chunks are a key prefix each, in order.
// A chunk's value is its token count and text length (uvarints), its
// text, then its vector as little-endian float32s.
package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// pageSize is how many records or chunks List and EachChunk read in one
// transaction: fn runs between transactions, so that it may write.
const pageSize = 256

var chunksBucket = []byte("chunks")

// Store is the embedded store. It implements kbstore.Store.
type Store struct {
	db    *bolt.DB
	path  string
	locks keyLocks
}

// Open opens (or creates) the store in the file at path, creating its
// directory. Only one process may hold the file at a time.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("knowledge base store: creating the directory of %s: %w; check the data directory's permissions", path, err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("knowledge base store: %s is in use by another process (another llmgw with the same data directory?); stop it or give this one a data directory of its own", path)
	}
	if err != nil {
		return nil, fmt.Errorf("knowledge base store: opening %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(chunksBucket)
		return err
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("knowledge base store: preparing %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Close closes the file.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("knowledge base store: closing %s: %w", s.path, err)
	}
	return nil
}

// Watch returns at once: no other node writes this store.
func (s *Store) Watch(ctx context.Context, fn func(kbstore.Change)) error { return nil }

func recordBucket(kind string) []byte { return []byte("record/" + kind) }

// Put writes a record.
func (s *Store) Put(ctx context.Context, kind, id string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("knowledge base store: writing %s %q: %w", kind, id, err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return put(tx, kind, id, body) })
	if err != nil {
		return fmt.Errorf("knowledge base store: writing %s %q in %s: %w", kind, id, s.path, err)
	}
	return nil
}

func put(tx *bolt.Tx, kind, id string, body []byte) error {
	if id == "" {
		return errors.New("the id is empty")
	}
	b, err := tx.CreateBucketIfNotExists(recordBucket(kind))
	if err != nil {
		return err
	}
	return b.Put([]byte(id), body)
}

// Get reads a record, kbstore.ErrNotFound when absent.
func (s *Store) Get(ctx context.Context, kind, id string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("knowledge base store: reading %s %q: %w", kind, id, err)
	}
	var body []byte
	err := s.db.View(func(tx *bolt.Tx) error {
		body = get(tx, kind, id)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("knowledge base store: reading %s %q in %s: %w", kind, id, s.path, err)
	}
	if body == nil {
		return nil, fmt.Errorf("knowledge base store: %s %q: %w", kind, id, kbstore.ErrNotFound)
	}
	return body, nil
}

// get copies a record's body out of tx, nil when absent.
func get(tx *bolt.Tx, kind, id string) []byte {
	b := tx.Bucket(recordBucket(kind))
	if b == nil || id == "" {
		return nil
	}
	v := b.Get([]byte(id))
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// Delete deletes a record; an absent one is no error.
func (s *Store) Delete(ctx context.Context, kind, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("knowledge base store: deleting %s %q: %w", kind, id, err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error { return del(tx, kind, id) })
	if err != nil {
		return fmt.Errorf("knowledge base store: deleting %s %q in %s: %w", kind, id, s.path, err)
	}
	return nil
}

func del(tx *bolt.Tx, kind, id string) error {
	b := tx.Bucket(recordBucket(kind))
	if b == nil || id == "" {
		return nil
	}
	return b.Delete([]byte(id))
}

// Update reads a record, passes it to fn and writes what fn returns.
// Updates of one record take turns; a Put between the read and the
// write makes fn run again on what it wrote.
func (s *Store) Update(ctx context.Context, kind, id string, fn func(body []byte) ([]byte, error)) error {
	unlock := s.locks.lock(kind + "\x00" + id)
	defer unlock()
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("knowledge base store: updating %s %q: %w", kind, id, err)
		}
		var seen []byte
		err := s.db.View(func(tx *bolt.Tx) error { seen = get(tx, kind, id); return nil })
		if err != nil {
			return fmt.Errorf("knowledge base store: reading %s %q in %s: %w", kind, id, s.path, err)
		}
		body, err := fn(seen)
		if err != nil {
			return err
		}
		changed := false
		err = s.db.Update(func(tx *bolt.Tx) error {
			if cur := get(tx, kind, id); !bytes.Equal(cur, seen) || (cur == nil) != (seen == nil) {
				changed = true
				return nil
			}
			if body == nil {
				return del(tx, kind, id)
			}
			return put(tx, kind, id, body)
		})
		if err != nil {
			return fmt.Errorf("knowledge base store: updating %s %q in %s: %w", kind, id, s.path, err)
		}
		if !changed {
			return nil
		}
	}
}

type record struct {
	id   string
	body []byte
}

// List calls fn with every record of kind whose id starts with prefix,
// in id order, until fn returns an error.
func (s *Store) List(ctx context.Context, kind, prefix string, fn func(id string, body []byte) error) error {
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("knowledge base store: listing %s: %w", kind, err)
		}
		var page []record
		err := s.db.View(func(tx *bolt.Tx) error {
			b := tx.Bucket(recordBucket(kind))
			if b == nil {
				return nil
			}
			seekPage(b.Cursor(), []byte(prefix), after, func(k, v []byte) {
				page = append(page, record{string(k), append([]byte{}, v...)})
			})
			return nil
		})
		if err != nil {
			return fmt.Errorf("knowledge base store: listing %s in %s: %w", kind, s.path, err)
		}
		for _, r := range page {
			if err := fn(r.id, r.body); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = []byte(page[len(page)-1].id)
	}
}

// seekPage calls fn with up to pageSize keys that start with prefix,
// after the key after (from the first when nil).
func seekPage(c *bolt.Cursor, prefix, after []byte, fn func(k, v []byte)) {
	k, v := c.Seek(prefix)
	if after != nil {
		if k, v = c.Seek(after); bytes.Equal(k, after) {
			k, v = c.Next()
		}
	}
	for n := 0; k != nil && bytes.HasPrefix(k, prefix) && n < pageSize; k, v = c.Next() {
		fn(k, v)
		n++
	}
}

// keyLocks are mutexes by key, held by Update so that updates of one
// record take turns in this process (bbolt lets one process in).
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu      sync.Mutex
	waiters int
}

func (l *keyLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*keyLock{}
	}
	k := l.m[key]
	if k == nil {
		k = &keyLock{}
		l.m[key] = k
	}
	k.waiters++
	l.mu.Unlock()
	k.mu.Lock()
	return func() {
		k.mu.Unlock()
		l.mu.Lock()
		if k.waiters--; k.waiters == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
}

// Interface guards
var _ kbstore.Store = (*Store)(nil)
