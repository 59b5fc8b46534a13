// Package mirror keeps model weights in one or two stores (a local directory
// or S3-compatible object storage), each version as files plus a manifest of
// their sizes and sha256, keeps two stores in step, and fetches versions to a
// node's local cache. It imports no Caddy.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Store is one place versions are kept. Keys are slash-separated paths
// relative to the store's root (its directory, or its bucket and prefix).
type Store interface {
	// Name is the store's name in the configuration.
	Name() string
	// Put stores size bytes read from src under key. The bytes must hash to
	// sum (hex sha256) when it is given: otherwise nothing is stored and the
	// error wraps ErrChecksum. The sum of what was stored comes back in the
	// stats. An interrupted Put of a large object resumes on the next call
	// with the same key, keeping the parts already stored that match.
	Put(ctx context.Context, key string, src io.ReaderAt, size int64, sum string, t *Transfer) (PutStats, error)
	// PutSmall stores a small object (manifests, tombstones) in one request.
	PutSmall(ctx context.Context, key string, data []byte) error
	// Open reads the object from byte off to its end.
	Open(ctx context.Context, key string, off int64) (io.ReadCloser, error)
	// ReaderAt gives random access to the object, for copies between stores.
	ReaderAt(ctx context.Context, key string) (ReadAtCloser, error)
	// Stat describes one object; the error wraps ErrNotFound when it is absent.
	Stat(ctx context.Context, key string) (Object, error)
	// List returns every object whose key starts with prefix.
	List(ctx context.Context, prefix string) ([]Object, error)
	// Delete removes an object; removing an absent one is not an error.
	Delete(ctx context.Context, key string) error
	// Ping checks that the store answers.
	Ping(ctx context.Context) error
}

// ReadAtCloser is random access to a stored object.
type ReadAtCloser interface {
	io.ReaderAt
	io.Closer
}

// Object is one stored object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// PutStats counts what a Put sent and what it found already stored.
type PutStats struct {
	PartsSent   int   `json:"parts_sent"`
	PartsReused int   `json:"parts_reused"`
	BytesSent   int64 `json:"bytes_sent"`
	// SHA256 and BLAKE3 are the sums of the bytes stored (set by Put).
	SHA256 string `json:"-"`
	BLAKE3 string `json:"-"`
}

func (s *PutStats) add(o PutStats) {
	s.PartsSent += o.PartsSent
	s.PartsReused += o.PartsReused
	s.BytesSent += o.BytesSent
}

var (
	// ErrNotFound is returned for absent objects, versions and models.
	ErrNotFound = errors.New("not found")
	// ErrChecksum is returned when bytes do not hash to what the manifest says.
	ErrChecksum = errors.New("checksum mismatch")
)

// UnreachableError says a store did not answer.
type UnreachableError struct {
	Store string
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("store %s is unreachable: %v", e.Store, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }
