package pgstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// blobPart is the most bytes of a file one row of llmgw_kb_blobs holds.
const blobPart = 1 << 20

// PutBlob writes data under id, replacing what was there, in one
// transaction: every node reads the old bytes or the new ones, never a
// mix. A blob of no bytes is one empty part, so that it is present.
func (s *Store) PutBlob(ctx context.Context, id string, data []byte) error {
	if id == "" {
		return fmt.Errorf("knowledge base files: writing a file's bytes: the id is empty")
	}
	parts := max(1, (len(data)+blobPart-1)/blobPart)
	err := s.write(ctx, kbstore.Change{}, func(tx pgx.Tx) (bool, error) {
		if _, err := tx.Exec(ctx, `DELETE FROM llmgw_kb_blobs WHERE id = $1`, id); err != nil {
			return false, err
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{"llmgw_kb_blobs"}, []string{"id", "part", "data"},
			pgx.CopyFromSlice(parts, func(i int) ([]any, error) {
				part := data[i*blobPart : min(len(data), (i+1)*blobPart)]
				if part == nil {
					part = []byte{} // no bytes, not NULL
				}
				return []any{id, int32(i), part}, nil
			}))
		return false, err // the index has nothing of the bytes: no notification
	})
	if err != nil {
		return s.fail(fmt.Sprintf("writing the bytes of %s", id), err)
	}
	return nil
}

// GetBlob reads the bytes of id, kbstore.ErrNotFound when absent.
func (s *Store) GetBlob(ctx context.Context, id string) ([]byte, error) {
	var data []byte
	found := false
	err := s.read(ctx, func() error {
		var buf bytes.Buffer
		var part int32
		var chunk []byte
		n := int32(0)
		rows, _ := s.pool.Query(ctx, `SELECT part, data FROM llmgw_kb_blobs WHERE id = $1 ORDER BY part`, id)
		_, err := pgx.ForEachRow(rows, []any{&part, &chunk}, func() error {
			if part != n {
				return permanent{fmt.Errorf("part %d of %s is missing", n, id)}
			}
			n++
			buf.Write(chunk)
			return nil
		})
		data, found = buf.Bytes(), n > 0
		return err
	})
	if err != nil {
		return nil, s.fail(fmt.Sprintf("reading the bytes of %s", id), err)
	}
	if !found {
		return nil, fmt.Errorf("knowledge base files: %s: %w", id, kbstore.ErrNotFound)
	}
	return data, nil
}

// DeleteBlob deletes every part of id; an absent id is no error.
func (s *Store) DeleteBlob(ctx context.Context, id string) error {
	err := s.write(ctx, kbstore.Change{}, func(tx pgx.Tx) (bool, error) {
		_, err := tx.Exec(ctx, `DELETE FROM llmgw_kb_blobs WHERE id = $1`, id)
		return false, err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("deleting the bytes of %s", id), err)
	}
	return nil
}

// Interface guards
var _ kbstore.Blobs = (*Store)(nil)
