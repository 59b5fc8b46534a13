package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// notice is a change as the notifications carry it.
type notice struct {
	Op    string `json:"op"`
	Store string `json:"store,omitempty"`
	File  string `json:"file,omitempty"`
	Kind  string `json:"kind,omitempty"`
	ID    string `json:"id,omitempty"`
	Node  string `json:"node"`
}

// maxPayload keeps a notification under PostgreSQL's 8000 bytes: a
// longer one becomes "resync".
const maxPayload = 7000

// notify tells the other nodes of ch, in tx.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, ch kbstore.Change) error {
	payload, _ := json.Marshal(notice{Op: ch.Op, Store: ch.Store, File: ch.File, Kind: ch.Kind, ID: ch.ID, Node: s.node})
	if len(payload) > maxPayload {
		payload, _ = json.Marshal(notice{Op: "resync", Node: s.node})
	}
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel, string(payload))
	return err
}

// maxAttempts bounds the runs of one operation.
const maxAttempts = 8

// permanent is an error no new attempt can mend (Update's fn's, a
// malformed row): never retried.
type permanent struct{ err error }

func (e permanent) Error() string { return e.err.Error() }
func (e permanent) Unwrap() error { return e.err }

// retryable reports whether an operation that failed with err may
// succeed when run again: a serialization failure, a deadlock, a
// concurrent insert of the same key, or a connection lost (PostgreSQL
// restarted: the pool's idle connections are dead; a fresh one works).
func retryable(err error) bool {
	if _, ok := errors.AsType[permanent](err); ok {
		return false
	}
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		c := pgErr.Code
		return c == "40001" || c == "40P01" || c == "23505" || strings.HasPrefix(c, "57P") || strings.HasPrefix(c, "08")
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// pause waits before the next attempt, a little longer each time.
func pause(ctx context.Context, attempt int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(attempt*attempt) * time.Duration(2+rand.IntN(8)) * time.Millisecond):
		return nil
	}
}

// read runs a query again when it failed for a retryable reason.
func (s *Store) read(ctx context.Context, query func() error) error {
	for attempt := 1; ; attempt++ {
		err := query()
		if err == nil || attempt == maxAttempts || !retryable(err) || ctx.Err() != nil {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// write runs fn in a transaction that also notifies ch when fn reports a
// change, and runs it again when that may succeed, unless the commit
// itself lost its connection: then whether it committed is unknown.
func (s *Store) write(ctx context.Context, ch kbstore.Change, fn func(tx pgx.Tx) (changed bool, err error)) error {
	for attempt := 1; ; attempt++ {
		committing, err := s.tx(ctx, ch, fn)
		var pgErr *pgconn.PgError
		if err == nil || attempt == maxAttempts || !retryable(err) || ctx.Err() != nil || (committing && !errors.As(err, &pgErr)) {
			return err
		}
		if err := pause(ctx, attempt); err != nil {
			return err
		}
	}
}

// tx is one run of write's transaction.
func (s *Store) tx(ctx context.Context, ch kbstore.Change, fn func(tx pgx.Tx) (bool, error)) (committing bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.Background()) // after Commit, nothing to do
	changed, err := fn(tx)
	if err == nil && changed {
		err = s.notify(ctx, tx, ch)
	}
	if err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func recordChange(kind, id string) kbstore.Change {
	return kbstore.Change{Op: "record", Kind: kind, ID: id}
}

// Put writes a record (a JSON body).
func (s *Store) Put(ctx context.Context, kind, id string, body []byte) error {
	if id == "" {
		return fmt.Errorf("knowledge base store: writing %s: the id is empty", kind)
	}
	err := s.write(ctx, recordChange(kind, id), func(tx pgx.Tx) (bool, error) {
		_, err := tx.Exec(ctx, `INSERT INTO llmgw_kb_records (kind, id, body) VALUES ($1, $2, $3)
			ON CONFLICT (kind, id) DO UPDATE SET body = excluded.body`, kind, id, body)
		return true, err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("writing %s %q", kind, id), err)
	}
	return nil
}

// Get reads a record, kbstore.ErrNotFound when absent.
func (s *Store) Get(ctx context.Context, kind, id string) ([]byte, error) {
	var body []byte
	err := s.read(ctx, func() error {
		return s.pool.QueryRow(ctx, `SELECT body FROM llmgw_kb_records WHERE kind = $1 AND id = $2`, kind, id).Scan(&body)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("knowledge base store: %s %q: %w", kind, id, kbstore.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail(fmt.Sprintf("reading %s %q", kind, id), err)
	}
	return body, nil
}

// Delete deletes a record; an absent one is no error.
func (s *Store) Delete(ctx context.Context, kind, id string) error {
	err := s.write(ctx, recordChange(kind, id), func(tx pgx.Tx) (bool, error) {
		tag, err := tx.Exec(ctx, `DELETE FROM llmgw_kb_records WHERE kind = $1 AND id = $2`, kind, id)
		return tag.RowsAffected() > 0, err
	})
	if err != nil {
		return s.fail(fmt.Sprintf("deleting %s %q", kind, id), err)
	}
	return nil
}

// Update reads a record with SELECT … FOR UPDATE, passes it to fn and
// writes what fn returns, in one transaction: updates of one record on
// every node take turns. fn runs again when two nodes create the record
// at once. fn holds a connection: it must not wait for the store.
func (s *Store) Update(ctx context.Context, kind, id string, fn func(body []byte) ([]byte, error)) error {
	if id == "" {
		return fmt.Errorf("knowledge base store: updating %s: the id is empty", kind)
	}
	err := s.write(ctx, recordChange(kind, id), func(tx pgx.Tx) (bool, error) {
		var old []byte
		err := tx.QueryRow(ctx, `SELECT body FROM llmgw_kb_records WHERE kind = $1 AND id = $2 FOR UPDATE`, kind, id).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return false, err
		}
		body, err := fn(old)
		if err != nil {
			return false, permanent{err}
		}
		return updateRow(ctx, tx, kind, id, old, body)
	})
	if fe, ok := errors.AsType[permanent](err); ok {
		return fe.err
	}
	if err != nil {
		return s.fail(fmt.Sprintf("updating %s %q", kind, id), err)
	}
	return nil
}

// updateRow writes body over old (nil: absent) in tx.
func updateRow(ctx context.Context, tx pgx.Tx, kind, id string, old, body []byte) (bool, error) {
	var err error
	switch {
	case old == nil && body == nil:
		return false, nil
	case body == nil:
		_, err = tx.Exec(ctx, `DELETE FROM llmgw_kb_records WHERE kind = $1 AND id = $2`, kind, id)
	case old == nil:
		_, err = tx.Exec(ctx, `INSERT INTO llmgw_kb_records (kind, id, body) VALUES ($1, $2, $3)`, kind, id, body)
	default:
		_, err = tx.Exec(ctx, `UPDATE llmgw_kb_records SET body = $3 WHERE kind = $1 AND id = $2`, kind, id, body)
	}
	return true, err
}

// List calls fn with every record of kind whose id starts with prefix,
// in id order (bytewise), until fn returns an error.
func (s *Store) List(ctx context.Context, kind, prefix string, fn func(id string, body []byte) error) error {
	after := ""
	for {
		var page []record
		err := s.read(ctx, func() error {
			rows, _ := s.pool.Query(ctx, `SELECT id, body FROM llmgw_kb_records
				WHERE kind = $1 AND starts_with(id, $2) AND id > $3 ORDER BY id LIMIT $4`, kind, prefix, after, pageSize)
			var err error
			page, err = pgx.CollectRows(rows, scanRecord)
			return err
		})
		if err != nil {
			return s.fail("listing "+kind, err)
		}
		for _, r := range page {
			if err := fn(r.id, r.body); err != nil {
				return err
			}
		}
		if len(page) < pageSize {
			return nil
		}
		after = page[len(page)-1].id
	}
}

type record struct {
	id   string
	body []byte
}

func scanRecord(r pgx.CollectableRow) (record, error) {
	var rec record
	err := r.Scan(&rec.id, &rec.body)
	return rec, err
}
