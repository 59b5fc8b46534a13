package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Store is the cluster's audit stream, which every node writes to. The
// cluster member implements it over a Redis stream.
type Store interface {
	// AddAudit appends e to the stream, trimmed to about max entries.
	AddAudit(ctx context.Context, e llmapi.AuditEntry, max int) error
	// ReadAudit reads the entries q matches, newest first, scanning at
	// most max entries; an entry's ID is its stream ID, and q.Cursor, when
	// set, is one (Log.Read checks it first).
	ReadAudit(ctx context.Context, q Query, max int) (llmapi.AuditPage, error)
}

// Options are what a config's Log is made of.
type Options struct {
	// Storage is this node's Caddy storage, where entries are kept.
	Storage certmagic.Storage
	// Config bounds the log; nil means the defaults.
	Config *Config
	// Store is the cluster's stream; nil on a single node.
	Store Store
	// Logger takes the failures of recording an entry.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// writers are the segments being written, one per storage: a reload that
// keeps its storage goes on writing the same segment.
var writers = caddy.NewUsagePool()

// Log is the audit log as one config writes and reads it.
type Log struct {
	o   Options
	w   *writer
	key string // the writer's key in the pool
}

// Open returns the log of a config; Close lets go of it when the config
// stops.
func Open(o Options) *Log {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	key := "audit:" + storageName(o.Storage)
	v, _, _ := writers.LoadOrNew(key, func() (caddy.Destructor, error) { return new(writer), nil })
	return &Log{o: o, w: v.(*writer), key: key}
}

// storageName tells storages apart: by their String (a file storage's
// is its directory), else by identity.
func storageName(st certmagic.Storage) string {
	if s, ok := st.(fmt.Stringer); ok {
		return fmt.Sprintf("%T:%s", st, s)
	}
	return fmt.Sprintf("%T:%p", st, st)
}

// Close lets go of the segment being written; the last config's close
// ends it (the next entry then starts a new one).
func (l *Log) Close() {
	if l != nil && l.key != "" {
		_, _ = writers.Delete(l.key)
		l.key = ""
	}
}

// Record keeps e in storage and in the cluster's stream; a failure is
// logged, as a change is made whether or not it is recorded.
func (l *Log) Record(ctx context.Context, e llmapi.AuditEntry) {
	if err := l.w.append(ctx, l.o.Storage, l.o.Config, e, l.o.Now()); err != nil {
		l.o.Logger.Error("recording an audit entry in storage", zap.String("action", e.Action), zap.Error(err))
	}
	if l.o.Store != nil {
		if err := l.o.Store.AddAudit(ctx, e, l.o.Config.maxEntries()); err != nil {
			l.o.Logger.Warn("recording an audit entry in the cluster store; it is in this node's storage", zap.String("action", e.Action), zap.Error(err))
		}
	}
}

// Read answers q, newest first: from the cluster's stream when there is
// one, else (or, for a first page, when the stream does not answer, with
// a warning saying so) from this node's storage.
func (l *Log) Read(ctx context.Context, q Query) (llmapi.AuditPage, error) {
	if l.o.Store == nil {
		p, err := l.readStorage(ctx, q)
		if p.Entries == nil {
			p.Entries = []llmapi.AuditEntry{}
		}
		return p, err
	}
	if q.Cursor != "" && !streamID.MatchString(q.Cursor) {
		return llmapi.AuditPage{}, errorf(ErrCursor, "cursor %s is not one of the cluster's audit stream; start again without cursor", catalog.Bounded(q.Cursor))
	}
	p, err := l.o.Store.ReadAudit(ctx, q, l.o.Config.maxEntries())
	if err == nil {
		return p, nil
	}
	if q.Cursor != "" {
		return llmapi.AuditPage{}, errorf(ErrStoreDown, "reading the cluster's audit stream: %v; try again when the store answers", err)
	}
	p, lerr := l.readStorage(ctx, q)
	if lerr != nil {
		return p, lerr
	}
	p.Warning = "the cluster store does not answer (" + err.Error() + "); these are this node's entries only"
	return p, nil
}

func (l *Log) readStorage(ctx context.Context, q Query) (llmapi.AuditPage, error) {
	p, err := readStorage(ctx, l.o.Storage, q)
	if err != nil {
		return llmapi.AuditPage{}, fmt.Errorf("reading the audit log: %w", err)
	}
	return p, nil
}

// Interface guards
var _ caddy.Destructor = (*writer)(nil)
