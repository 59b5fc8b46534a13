// Package pgstore is the knowledge bases' shared store: PostgreSQL,
// reached by every node of a cluster.
//
// Open creates the tables it needs when absent (llmgw_kb_schema holds
// the versions of the migrations applied, in order, under an advisory
// lock so that nodes starting together apply each once):
// llmgw_kb_records (kind, id, body jsonb), llmgw_kb_chunks (store,
// file, seq, text, tokens, vector bytea of little-endian float32s) and
// llmgw_kb_blobs (id, part, data bytea): the files' original bytes, in
// parts of at most 1 MiB, so that every node reads a file uploaded
// through any other (the Store is also a kbstore.Blobs).
//
// Every write that changes records or chunks also sends, in its own
// transaction, a notification on the channel llmgw_kb: a small JSON
// kbstore.Change naming the node that wrote it, so that Watch on the
// other nodes reports it and the writer's own Watch skips it.
//
// PostgreSQL keeps text as valid UTF-8 without NUL bytes: a chunk's
// text loses its NUL bytes, and invalid UTF-8 becomes U+FFFD.
package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// channel is the channel of the change notifications.
const channel = "llmgw_kb"

// pageSize is how many records or chunks List and EachChunk read in one
// query: fn runs between queries, holding no connection.
const pageSize = 256

// migrations are the schema's changes, in order; version n is
// migrations[n-1]. Append, never edit.
var migrations = []string{
	`CREATE TABLE llmgw_kb_records (
		kind text COLLATE "C" NOT NULL,
		id text COLLATE "C" NOT NULL,
		body jsonb NOT NULL,
		PRIMARY KEY (kind, id)
	);
	CREATE TABLE llmgw_kb_chunks (
		store text COLLATE "C" NOT NULL,
		file text COLLATE "C" NOT NULL,
		seq integer NOT NULL,
		text text NOT NULL,
		tokens integer NOT NULL,
		vector bytea,
		PRIMARY KEY (store, file, seq)
	)`,
	`CREATE TABLE llmgw_kb_blobs (
		id text COLLATE "C" NOT NULL,
		part integer NOT NULL,
		data bytea NOT NULL,
		PRIMARY KEY (id, part)
	)`,
}

// schemaLock is the key of the advisory lock held while migrating.
const schemaLock = 0x6c6c6d67 // "llmg"

// Store is the PostgreSQL store. It implements kbstore.Store.
type Store struct {
	pool *pgxpool.Pool
	conn *pgx.ConnConfig // for Watch's own connection
	addr string          // host:port, for messages (never the password)
	node string          // this Store's id in its notifications

	// WatchError, when set before Watch, is told why Watch lost (or
	// could not make) its connection; Watch retries with backoff.
	WatchError func(error)
}

// Open connects to the database of dsn (a postgres:// URL or key=value
// string, as libpq's) and creates or migrates the tables.
func Open(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("knowledge base store: reading the PostgreSQL dsn: %w; check the dsn in llm_kb's store", redact(err, dsnPassword(dsn)))
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = max(cfg.MaxConns, 16)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	s := &Store{
		conn: cfg.ConnConfig.Copy(),
		addr: net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))),
		node: rand.Text()[:16],
	}
	pw := cfg.ConnConfig.Password
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("knowledge base store: connecting to PostgreSQL at %s: %w; check the dsn in llm_kb's store", s.addr, redact(err, pw))
	}
	if err := s.pool.Ping(ctx); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("knowledge base store: connecting to PostgreSQL at %s: %w; check that PostgreSQL runs there and the dsn in llm_kb's store (host, port, user, password, database)", s.addr, redact(err, pw))
	}
	if err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, redact(err, pw)
	}
	return s, nil
}

// migrate applies the migrations the database lacks, in order.
func (s *Store) migrate(ctx context.Context) error {
	version := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, schemaLock); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS llmgw_kb_schema (
			version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM llmgw_kb_schema`).Scan(&version); err != nil {
			return err
		}
		if version > len(migrations) {
			return nil
		}
		for v := version + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO llmgw_kb_schema (version) VALUES ($1)`, v); err != nil {
				return err
			}
		}
		return nil
	})
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok && pgErr.Code == "42501" {
		return fmt.Errorf("knowledge base store: creating the tables in PostgreSQL at %s: %w; grant the dsn's user the right to create tables in its database (GRANT CREATE ON SCHEMA public TO …)", s.addr, err)
	}
	if err != nil {
		return fmt.Errorf("knowledge base store: creating the tables in PostgreSQL at %s: %w", s.addr, err)
	}
	if version > len(migrations) {
		return fmt.Errorf("knowledge base store: the tables in PostgreSQL at %s are of schema version %d, newer than this llmgw knows (%d): another node runs a newer llmgw; upgrade this one", s.addr, version, len(migrations))
	}
	return nil
}

// Close closes the connections (a running Watch keeps its own until its
// context ends).
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// dsnPassword is the password of a dsn, "" when it has none or cannot
// be read.
func dsnPassword(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		pw, _ := u.User.Password()
		return pw
	}
	for f := range strings.FieldsSeq(dsn) {
		if v, ok := strings.CutPrefix(f, "password="); ok {
			return strings.Trim(v, "'")
		}
	}
	return ""
}

// redact hides pw in err's message.
func redact(err error, pw string) error {
	if err == nil || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// fail wraps the error of an operation with where it failed and, when
// PostgreSQL could not be reached, what to check.
func (s *Store) fail(what string, err error) error {
	hint := ""
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		hint = "; check that PostgreSQL runs and the dsn in llm_kb's store"
	}
	return fmt.Errorf("knowledge base store: %s in PostgreSQL at %s: %w%s", what, s.addr, err, hint)
}

// Interface guards
var _ kbstore.Store = (*Store)(nil)
