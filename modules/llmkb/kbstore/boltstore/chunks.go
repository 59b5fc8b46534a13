package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// chunkPrefix is the key prefix of a store's chunks, or of a file's in it
// when file is not "".
func chunkPrefix(store, file string) []byte {
	p := append([]byte(store), 0)
	if file != "" {
		p = append(append(p, file...), 0)
	}
	return p
}

func chunkKey(store, file string, seq int) []byte {
	return binary.BigEndian.AppendUint32(chunkPrefix(store, file), uint32(seq))
}

// encodeChunk is a chunk's value: tokens, text length, text, vector.
func encodeChunk(c kbstore.Chunk) []byte {
	b := make([]byte, 0, 2*binary.MaxVarintLen64+len(c.Text)+4*len(c.Vector))
	b = binary.AppendUvarint(b, uint64(c.Tokens))
	b = binary.AppendUvarint(b, uint64(len(c.Text)))
	b = append(b, c.Text...)
	for _, f := range c.Vector {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

// decodeChunk reads a chunk from its key and value.
func decodeChunk(k, v []byte) (kbstore.Chunk, error) {
	parts := bytes.SplitN(k, []byte{0}, 3)
	if len(parts) != 3 || len(parts[2]) != 4 {
		return kbstore.Chunk{}, fmt.Errorf("malformed chunk key %q", k)
	}
	c := kbstore.Chunk{Store: string(parts[0]), File: string(parts[1]), Seq: int(binary.BigEndian.Uint32(parts[2]))}
	tokens, n := binary.Uvarint(v)
	textLen, m := binary.Uvarint(v[max(n, 0):])
	if n <= 0 || m <= 0 || uint64(len(v)-n-m) < textLen || (uint64(len(v)-n-m)-textLen)%4 != 0 {
		return kbstore.Chunk{}, fmt.Errorf("malformed chunk %s/%s#%d", c.Store, c.File, c.Seq)
	}
	c.Tokens = int(tokens)
	rest := v[n+m:]
	c.Text = string(rest[:textLen])
	if vec := rest[textLen:]; len(vec) > 0 {
		c.Vector = make([]float32, len(vec)/4)
		for i := range c.Vector {
			c.Vector[i] = math.Float32frombits(binary.LittleEndian.Uint32(vec[4*i:]))
		}
	}
	return c, nil
}

// checkNames refuses names that would break the keys' prefixes.
func checkNames(store, file string) error {
	if store == "" || strings.ContainsRune(store, 0) || strings.ContainsRune(file, 0) {
		return fmt.Errorf("invalid store %q or file %q: a store is named and no name holds a NUL byte", store, file)
	}
	return nil
}

// PutChunks replaces the chunks of a file in a store.
func (s *Store) PutChunks(ctx context.Context, store, file string, chunks []kbstore.Chunk) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("knowledge base store: writing the chunks of %s in %s: %w", file, store, err)
	}
	if err := checkNames(store, file); err != nil || file == "" {
		return fmt.Errorf("knowledge base store: writing chunks: %w", errors.Join(err, errors.New("a file is named")))
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(chunksBucket)
		if err := deletePrefix(b, chunkPrefix(store, file)); err != nil {
			return err
		}
		for _, c := range chunks {
			if c.Seq < 0 || c.Seq > math.MaxUint32 {
				return fmt.Errorf("chunk sequence number %d out of range", c.Seq)
			}
			if err := b.Put(chunkKey(store, file, c.Seq), encodeChunk(c)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("knowledge base store: writing the chunks of %s in %s to %s: %w", file, store, s.path, err)
	}
	return nil
}

// deletePrefix deletes the keys of b that start with prefix.
func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, append([]byte{}, k...))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// DeleteChunks deletes the chunks of a file in a store, or of every file
// of the store when file is "".
func (s *Store) DeleteChunks(ctx context.Context, store, file string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("knowledge base store: deleting the chunks of %s %q: %w", store, file, err)
	}
	if err := checkNames(store, file); err != nil {
		return fmt.Errorf("knowledge base store: deleting chunks: %w", err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		return deletePrefix(tx.Bucket(chunksBucket), chunkPrefix(store, file))
	})
	if err != nil {
		return fmt.Errorf("knowledge base store: deleting the chunks of %s %q in %s: %w", store, file, s.path, err)
	}
	return nil
}

// Chunks reads chunks by reference, in the order asked; absent ones are
// left out.
func (s *Store) Chunks(ctx context.Context, refs []kbstore.ChunkRef) ([]kbstore.Chunk, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("knowledge base store: reading chunks: %w", err)
	}
	var out []kbstore.Chunk
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(chunksBucket)
		for _, r := range refs {
			if checkNames(r.Store, r.File) != nil || r.File == "" || r.Seq < 0 || r.Seq > math.MaxUint32 {
				continue
			}
			k := chunkKey(r.Store, r.File, r.Seq)
			v := b.Get(k)
			if v == nil {
				continue
			}
			c, err := decodeChunk(k, v)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("knowledge base store: reading chunks from %s: %w", s.path, err)
	}
	return out, nil
}

// EachChunk calls fn with every chunk, until fn returns an error.
func (s *Store) EachChunk(ctx context.Context, fn func(kbstore.Chunk) error) error {
	var after []byte
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("knowledge base store: reading every chunk: %w", err)
		}
		var page []kbstore.Chunk
		var bad error
		err := s.db.View(func(tx *bolt.Tx) error {
			seekPage(tx.Bucket(chunksBucket).Cursor(), nil, after, func(k, v []byte) {
				c, err := decodeChunk(k, v)
				bad = errors.Join(bad, err)
				page = append(page, c)
				after = append(after[:0], k...)
			})
			return bad
		})
		if err != nil {
			return fmt.Errorf("knowledge base store: reading every chunk from %s: %w", s.path, err)
		}
		for _, c := range page {
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
	}
}
