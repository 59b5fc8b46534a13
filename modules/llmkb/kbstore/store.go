// Package kbstore keeps the knowledge bases' records and chunks: files,
// vector stores, the files in each store and their batches, and the chunks
// (text and vector) that searches are made over. One interface, two
// homes: an embedded store in Caddy's data directory on one node (the
// default, no server to run), and PostgreSQL shared by every node of a
// cluster. The original bytes of files are kept elsewhere (see Blobs).
package kbstore

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned for a record that does not exist.
var ErrNotFound = errors.New("not found")

// Kinds of records.
const (
	KindFile      = "file"       // *File
	KindStore     = "store"      // *VectorStore
	KindStoreFile = "store_file" // *StoreFile, id StoreFileID(store, file)
	KindBatch     = "batch"      // *Batch
)

// StoreFileID is the record id of a file's membership of a store.
func StoreFileID(store, file string) string { return store + "/" + file }

// File is an uploaded file (OpenAI's File object plus its owner).
type File struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`         // tenant path: "org/team/project", "" without keys
	Key       string    `json:"key,omitempty"` // the id of the key that uploaded it
	Filename  string    `json:"filename"`
	Bytes     int64     `json:"bytes"`
	Purpose   string    `json:"purpose"`
	SHA256    string    `json:"sha256"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// VectorStore is a knowledge base (OpenAI's Vector Store plus its owner).
type VectorStore struct {
	ID     string `json:"id"`
	Owner  string `json:"owner"`
	Shared bool   `json:"shared,omitempty"` // seen by the tenants below Owner too
	// Creator is the project whose key made a shared store: it may
	// change it; the others it is shared with may only read it.
	Creator  string            `json:"creator,omitempty"`
	Name     string            `json:"name"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Embedder is the catalog model that embeds its chunks, "" for
	// keywords alone; Dims the length of its vectors once known.
	Embedder     string        `json:"embedder,omitempty"`
	Dims         int           `json:"dims,omitempty"`
	Chunking     Chunking      `json:"chunking"`
	ExpiresAfter *ExpiresAfter `json:"expires_after,omitempty"`
	CreatedAt    time.Time     `json:"created_at"`
	LastActiveAt time.Time     `json:"last_active_at"`
	ExpiresAt    time.Time     `json:"expires_at,omitzero"`
	// Version grows with every change to the store's files: answers
	// cached from a search are keyed by it.
	Version int64 `json:"version"`
}

// Chunking is a chunking strategy: "auto" (800 tokens, 400 overlap, as
// OpenAI's) or "static" with its sizes.
type Chunking struct {
	Type          string `json:"type"`
	MaxTokens     int    `json:"max_chunk_size_tokens"`
	OverlapTokens int    `json:"chunk_overlap_tokens"`
}

// ExpiresAfter is a store's expiration policy.
type ExpiresAfter struct {
	Anchor string `json:"anchor"` // "last_active_at"
	Days   int    `json:"days"`
}

// States of a file in a store and of a batch.
const (
	InProgress = "in_progress"
	Completed  = "completed"
	Failed     = "failed"
	Cancelled  = "cancelled"
)

// StoreFile is a file in a store: its ingestion state and attributes.
type StoreFile struct {
	StoreID    string         `json:"vector_store_id"`
	FileID     string         `json:"file_id"`
	Owner      string         `json:"owner"`
	Status     string         `json:"status"`
	LastError  *LastError     `json:"last_error,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	Chunking   Chunking       `json:"chunking"`
	BatchID    string         `json:"batch_id,omitempty"`
	UsageBytes int64          `json:"usage_bytes"`
	Chunks     int            `json:"chunks"`
	Tokens     int64          `json:"tokens"` // embedding tokens spent on it
	CreatedAt  time.Time      `json:"created_at"`
	// Attempts counts ingestions started: a restart resumes a file still
	// in progress, and gives up on one that failed this many times.
	Attempts int `json:"attempts"`
	// Worker is the node ingesting it until LeaseUntil: another node
	// takes it over once the lease has run out (the node stopped).
	Worker     string    `json:"worker,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
}

// LastError is why a file failed (OpenAI's last_error).
type LastError struct {
	Code    string `json:"code"` // "server_error", "unsupported_file", "invalid_file"
	Message string `json:"message"`
}

// Batch is a file batch of a store.
type Batch struct {
	ID        string    `json:"id"`
	StoreID   string    `json:"vector_store_id"`
	Owner     string    `json:"owner"`
	FileIDs   []string  `json:"file_ids"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// Chunk is one passage of a file in a store, with its vector.
type Chunk struct {
	Store  string    `json:"store"`
	File   string    `json:"file"`
	Seq    int       `json:"seq"`
	Text   string    `json:"text"`
	Tokens int       `json:"tokens"`
	Vector []float32 `json:"vector,omitempty"`
}

// ChunkRef names a chunk.
type ChunkRef struct {
	Store, File string
	Seq         int
}

// Change is a change another node made, for the nodes that keep an
// index in memory: chunks of a file put or deleted, a store deleted.
// "resync" names nothing: the watch lost its connection and is back, so
// changes may have been missed meanwhile; reload what is kept in memory.
type Change struct {
	Op    string // "chunks" (File's chunks replaced), "delete_file", "delete_store", "record", "resync"
	Store string
	File  string
	Kind  string // for "record": the kind and id of the record changed
	ID    string
}

// Store keeps the records and chunks. Records are JSON bodies by kind and
// id; every method is safe for concurrent use.
type Store interface {
	// Put writes a record; Get reads one (ErrNotFound when absent).
	Put(ctx context.Context, kind, id string, body []byte) error
	Get(ctx context.Context, kind, id string) ([]byte, error)
	// Update reads a record, passes it to fn and writes what fn returns,
	// atomically (across nodes for a shared store): fn may run again.
	// fn gets nil for an absent record; returning nil body deletes it.
	Update(ctx context.Context, kind, id string, fn func(body []byte) ([]byte, error)) error
	// List calls fn with every record of kind whose id starts with prefix,
	// in id order, until fn returns an error.
	List(ctx context.Context, kind, prefix string, fn func(id string, body []byte) error) error
	Delete(ctx context.Context, kind, id string) error

	// PutChunks replaces the chunks of a file in a store.
	PutChunks(ctx context.Context, store, file string, chunks []Chunk) error
	// DeleteChunks deletes the chunks of a file in a store, or of every
	// file of the store when file is "".
	DeleteChunks(ctx context.Context, store, file string) error
	// Chunks reads chunks by reference (absent ones are left out).
	Chunks(ctx context.Context, refs []ChunkRef) ([]Chunk, error)
	// EachChunk calls fn with every chunk, for building an index.
	EachChunk(ctx context.Context, fn func(Chunk) error) error

	// Watch calls fn with the changes other nodes make until ctx ends;
	// a store of one node returns at once.
	Watch(ctx context.Context, fn func(Change)) error
	Close() error
}

// Blobs keeps the original bytes of files: the weights mirror's S3
// stores when one is configured, else the data directory.
type Blobs interface {
	PutBlob(ctx context.Context, id string, data []byte) error
	GetBlob(ctx context.Context, id string) ([]byte, error)
	DeleteBlob(ctx context.Context, id string) error
}
