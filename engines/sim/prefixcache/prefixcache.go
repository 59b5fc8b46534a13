// Package prefixcache simulates an engine's prefix cache (the key/value
// cache vLLM, SGLang and llama.cpp keep of prompts they have processed):
// a prompt's tokens in blocks, each block's hash chained to the ones
// before it, the least recently used blocks evicted past a capacity. The
// sim engine uses it to make time to first token depend on the part of a
// prompt not cached; benchmarks use it as the oracle that knows every
// replica's cache. It is a simulator, not an engine's cache.
package prefixcache

import (
	"container/list"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync"
)

// BlockTokens is the tokens of a block (vLLM's default block size).
const BlockTokens = 16

var seed = maphash.MakeSeed()

// Blocks returns the chained hashes of a prompt's full blocks of tokens.
func Blocks(tokens []string) []uint64 {
	out := make([]uint64, 0, len(tokens)/BlockTokens)
	var h uint64
	for i := 0; i+BlockTokens <= len(tokens); i += BlockTokens {
		h = bits.RotateLeft64(h*0x9E3779B97F4A7C15, 31) ^ maphash.String(seed, strings.Join(tokens[i:i+BlockTokens], " "))
		out = append(out, h)
	}
	return out
}

// Cache is one replica's simulated prefix cache.
type Cache struct {
	mu       sync.Mutex
	capacity int // blocks
	held     map[uint64]*list.Element
	lru      list.List // front: most recent
}

// New returns a cache holding up to capacityTokens tokens.
func New(capacityTokens int) *Cache {
	return &Cache{capacity: max(capacityTokens/BlockTokens, 1), held: map[uint64]*list.Element{}}
}

// Peek returns how many of the blocks' leading ones are cached.
func (c *Cache) Peek(blocks []uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range blocks {
		if _, ok := c.held[b]; !ok {
			break
		}
		n++
	}
	return n
}

// Use returns how many of the blocks' leading ones are cached, then
// caches them all (the prompt is processed), evicting the least
// recently used blocks past the capacity.
func (c *Cache) Use(blocks []uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, b := range blocks {
		if _, ok := c.held[b]; !ok {
			break
		}
		n++
	}
	// Touched from the last block to the first, so that a prompt's
	// first blocks, which more prompts share, are evicted last.
	for i := len(blocks) - 1; i >= 0; i-- {
		if e, ok := c.held[blocks[i]]; ok {
			c.lru.MoveToFront(e)
		} else {
			c.held[blocks[i]] = c.lru.PushFront(blocks[i])
		}
	}
	for len(c.held) > c.capacity {
		e := c.lru.Back()
		c.lru.Remove(e)
		delete(c.held, e.Value.(uint64))
	}
	return n
}
