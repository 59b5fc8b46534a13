package kbindex

import (
	"github.com/dgraph-io/ristretto/v2"
)

// VectorCache holds query embeddings (and hot vectors) by model and text
// in a bounded concurrent cache. Admission is ristretto's TinyLFU: a new
// text gets in only when it is asked for more often than what it would
// push out, so a stream of one-off queries does not flush the repeated
// ones. A Put is applied asynchronously: a Get right after it may still
// miss. A nil *VectorCache holds nothing.
type VectorCache struct {
	c *ristretto.Cache[string, []float32]
}

// vectorOverhead is the bytes a cached vector costs beyond its floats:
// the cache's item, the slice header, the key's hashes.
const vectorOverhead = 96

// NewVectorCache returns a cache of at most maxBytes of vectors (at
// least 1 MiB).
func NewVectorCache(maxBytes int64) *VectorCache {
	maxBytes = max(maxBytes, 1<<20)
	items := maxBytes / (384*4 + vectorOverhead) // vectors of 384 floats or more
	c, err := ristretto.NewCache(&ristretto.Config[string, []float32]{
		NumCounters:        max(items*10, 1000),
		MaxCost:            maxBytes,
		BufferItems:        64,
		IgnoreInternalCost: true,
	})
	if err != nil { // only for a config out of range, which this is not
		return nil
	}
	return &VectorCache{c: c}
}

func cacheKey(model, text string) string { return model + "\x00" + text }

// Get returns the vector of text by model. The caller must not change it.
func (c *VectorCache) Get(model, text string) ([]float32, bool) {
	if c == nil {
		return nil, false
	}
	return c.c.Get(cacheKey(model, text))
}

// Put offers the vector of text by model to the cache, which keeps its
// own copy.
func (c *VectorCache) Put(model, text string, v []float32) {
	if c == nil || len(v) == 0 {
		return
	}
	own := append([]float32(nil), v...)
	c.c.Set(cacheKey(model, text), own, int64(len(own))*4+vectorOverhead)
}

// wait applies the Puts made so far (for tests).
func (c *VectorCache) wait() { c.c.Wait() }

// Close stops the cache's goroutines and frees what it holds.
func (c *VectorCache) Close() {
	if c != nil {
		c.c.Close()
	}
}
