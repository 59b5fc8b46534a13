package pgstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// encodeVector is a vector as little-endian float32 bytes, nil for none.
func encodeVector(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 0, 4*len(v))
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func decodeVector(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("a vector of %d bytes, not a multiple of 4", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// cleanText is text as PostgreSQL keeps it: valid UTF-8 without NUL.
func cleanText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
}

// PutChunks replaces the chunks of a file in a store.
func (s *Store) PutChunks(ctx context.Context, store, file string, chunks []kbstore.Chunk) error {
	what := fmt.Sprintf("writing the chunks of %s in %s", file, store)
	if store == "" || file == "" {
		return fmt.Errorf("knowledge base store: %s: a store and a file are named", what)
	}
	seen := make(map[int]bool, len(chunks))
	for _, c := range chunks {
		if seen[c.Seq] || c.Seq < 0 || c.Seq > math.MaxInt32 {
			return fmt.Errorf("knowledge base store: %s: sequence number %d repeated or out of range", what, c.Seq)
		}
		seen[c.Seq] = true
	}
	err := s.write(ctx, kbstore.Change{Op: "chunks", Store: store, File: file}, func(tx pgx.Tx) (bool, error) {
		if _, err := tx.Exec(ctx, `DELETE FROM llmgw_kb_chunks WHERE store = $1 AND file = $2`, store, file); err != nil {
			return false, err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"llmgw_kb_chunks"}, []string{"store", "file", "seq", "text", "tokens", "vector"},
			pgx.CopyFromSlice(len(chunks), func(i int) ([]any, error) {
				c := chunks[i]
				return []any{store, file, int32(c.Seq), cleanText(c.Text), int32(c.Tokens), encodeVector(c.Vector)}, nil
			}))
		return true, err
	})
	if err != nil {
		return s.fail(what, err)
	}
	return nil
}

// DeleteChunks deletes the chunks of a file in a store, or of every file
// of the store when file is "".
func (s *Store) DeleteChunks(ctx context.Context, store, file string) error {
	if store == "" {
		return fmt.Errorf("knowledge base store: deleting chunks: no store named")
	}
	ch := kbstore.Change{Op: "delete_file", Store: store, File: file}
	sql, args := `DELETE FROM llmgw_kb_chunks WHERE store = $1 AND file = $2`, []any{store, file}
	if file == "" {
		ch = kbstore.Change{Op: "delete_store", Store: store}
		sql, args = `DELETE FROM llmgw_kb_chunks WHERE store = $1`, []any{store}
	}
	err := s.write(ctx, ch, func(tx pgx.Tx) (bool, error) {
		_, err := tx.Exec(ctx, sql, args...)
		return true, err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("deleting the chunks of %s %q", store, file), err)
	}
	return nil
}

// scanChunk reads a row of store, file, seq, text, tokens, vector.
func scanChunk(r pgx.CollectableRow) (kbstore.Chunk, error) {
	var c kbstore.Chunk
	var seq, tokens int32
	var vec []byte
	if err := r.Scan(&c.Store, &c.File, &seq, &c.Text, &tokens, &vec); err != nil {
		return c, err
	}
	c.Seq, c.Tokens = int(seq), int(tokens)
	var err error
	if c.Vector, err = decodeVector(vec); err != nil {
		return c, permanent{fmt.Errorf("chunk %s/%s#%d: %w", c.Store, c.File, c.Seq, err)}
	}
	return c, nil
}

// Chunks reads chunks by reference, in the order asked; absent ones are
// left out.
func (s *Store) Chunks(ctx context.Context, refs []kbstore.ChunkRef) ([]kbstore.Chunk, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	stores, files, seqs := make([]string, len(refs)), make([]string, len(refs)), make([]int64, len(refs))
	for i, r := range refs {
		stores[i], files[i], seqs[i] = r.Store, r.File, int64(r.Seq)
	}
	var out []kbstore.Chunk
	err := s.read(ctx, func() error {
		rows, _ := s.pool.Query(ctx, `SELECT c.store, c.file, c.seq, c.text, c.tokens, c.vector
			FROM unnest($1::text[], $2::text[], $3::bigint[]) WITH ORDINALITY AS r(s, f, q, n)
			JOIN llmgw_kb_chunks c ON c.store = r.s AND c.file = r.f AND c.seq = r.q
			ORDER BY r.n`, stores, files, seqs)
		var err error
		out, err = pgx.CollectRows(rows, scanChunk)
		return err
	})
	if err != nil {
		return nil, s.fail("reading chunks", err)
	}
	return out, nil
}

// EachChunk calls fn with every chunk, until fn returns an error.
func (s *Store) EachChunk(ctx context.Context, fn func(kbstore.Chunk) error) error {
	var last kbstore.Chunk
	last.Seq = -1
	for {
		var page []kbstore.Chunk
		err := s.read(ctx, func() error {
			rows, _ := s.pool.Query(ctx, `SELECT store, file, seq, text, tokens, vector FROM llmgw_kb_chunks
				WHERE (store, file, seq) > ($1, $2, $3) ORDER BY store, file, seq LIMIT $4`, last.Store, last.File, last.Seq, pageSize)
			var err error
			page, err = pgx.CollectRows(rows, scanChunk)
			return err
		})
		if err != nil {
			return s.fail("reading every chunk", err)
		}
		for _, c := range page {
			if err := fn(c); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		last = page[len(page)-1]
	}
}
