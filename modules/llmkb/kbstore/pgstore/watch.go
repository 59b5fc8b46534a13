package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// The backoff between Watch's attempts to connect again.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// Watch calls fn with the changes the other nodes make until ctx ends,
// then returns nil. It LISTENs on a connection of its own; when that
// connection fails (PostgreSQL restarted, the network went away) it
// connects again with backoff and, once listening again, calls fn with
// a Change of Op "resync": changes may have been missed, reload.
func (s *Store) Watch(ctx context.Context, fn func(kbstore.Change)) error {
	backoff, missed := watchBackoffMin, false
	for {
		conn, err := s.listen(ctx)
		if err == nil {
			if missed {
				fn(kbstore.Change{Op: "resync"})
			}
			backoff, missed = watchBackoffMin, false
			err = s.receive(ctx, conn, fn)
			closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
			conn.Close(closeCtx)
			cancel()
		}
		if ctx.Err() != nil {
			return nil
		}
		missed = true
		if s.WatchError != nil {
			s.WatchError(fmt.Errorf("knowledge base store: watching for other nodes' changes in PostgreSQL at %s: %w; connecting again in %v", s.addr, redact(err, s.conn.Password), backoff))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchBackoffMax)
	}
}

// listen opens Watch's connection and LISTENs on the channel.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.conn.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+channel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// receive calls fn with each notification of another node until the
// connection fails or ctx ends.
func (s *Store) receive(ctx context.Context, conn *pgx.Conn, fn func(kbstore.Change)) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		var m notice
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.Node == s.node {
			continue
		}
		fn(kbstore.Change{Op: m.Op, Store: m.Store, File: m.File, Kind: m.Kind, ID: m.ID})
	}
}
