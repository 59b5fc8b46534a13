package llmkb

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// service is the knowledge bases of one store: shared by every llm_kb
// handler that names it, and kept across reloads (its ingestion queue
// and index survive them).
type service struct {
	store     kbstore.Store
	blobs     kbstore.Blobs
	ix        atomic.Pointer[kbindex.Index]
	vectors   *kbindex.VectorCache
	queue     *queue
	node      string       // this node, for ingestion leases: the same across restarts
	busy      sync.Map     // store-file ids this process ingests now
	changes   atomic.Int64 // this node's changes to the index, for resync
	embedding atomic.Int32 // embedding batches of imports in flight
	versions  sync.Map     // store id → the version its changes in the index are up to
	deps      atomic.Pointer[deps]
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// deps is what the latest configuration hands the service: the llm app
// that reaches the embedders, and the logger.
type deps struct {
	app    *llm.App
	logger *zap.Logger
	lease  time.Duration
	slots  func(model string) (free, total int) // the app's Slots
}

// openService opens the store (PostgreSQL when dsn is given, else the
// embedded one), loads the index and starts ingesting.
func openService(dsn string, vectorMemory int64, mirrorStores []mirror.Store, d *deps) (*service, error) {
	ctx, cancel := context.WithCancel(context.Background())
	store, blobs, err := openStore(ctx, dsn)
	if err != nil {
		cancel()
		return nil, err
	}
	if len(mirrorStores) > 0 {
		blobs = mirrorBlobs{stores: mirrorStores} // the files' bytes beside the weights, in S3
	}
	s := &service{store: store, blobs: blobs, vectors: kbindex.NewVectorCache(vectorMemory),
		queue: newQueue(), node: nodeID(), ctx: ctx, cancel: cancel}
	s.deps.Store(d) // before the workers start: they embed through it
	s.ix.Store(kbindex.New())
	if err := s.load(ctx, s.index()); err != nil {
		s.Destruct()
		return nil, fmt.Errorf("loading the knowledge bases' index: %w", err)
	}
	s.start()
	return s, nil
}

// nodeID names this node for ingestion leases: its host and data
// directory, so that a restarted gateway takes back at once the files it
// was ingesting when it stopped.
func nodeID() string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(caddy.AppDataDir()))
	return host + "-" + hex.EncodeToString(sum[:4])
}

// use hands the service the latest configuration's app and logger.
func (s *service) use(d *deps) { s.deps.Store(d) }

// newDeps is what a configuration hands the service.
func newDeps(app *llm.App, logger *zap.Logger, lease time.Duration) *deps {
	return &deps{app: app, logger: logger, lease: lease, slots: app.Slots}
}

func (s *service) app() *llm.App         { return s.deps.Load().app }
func (s *service) log() *zap.Logger      { return s.deps.Load().logger }
func (s *service) index() *kbindex.Index { return s.ix.Load() }

// changed is the index for a change this node makes.
func (s *service) changed() *kbindex.Index { s.changes.Add(1); return s.ix.Load() }
func (s *service) lease() time.Duration    { return s.deps.Load().lease }
func (s *service) spawn(fn func())         { s.wg.Add(1); go func() { defer s.wg.Done(); fn() }() }

// start runs the ingestion workers, the watch of other nodes' changes
// and the sweeper of leases run out and stores expired.
func (s *service) start() {
	for range ingestWorkers {
		s.spawn(s.work)
	}
	s.spawn(s.watch)
	s.spawn(s.sweep)
}

// Destruct stops the workers and closes the store.
func (s *service) Destruct() error {
	s.cancel()
	s.queue.close()
	s.wg.Wait()
	s.vectors.Close()
	return s.store.Close()
}

// load builds the index from every chunk in the store.
func (s *service) load(ctx context.Context, ix *kbindex.Index) error {
	stores, err := list[kbstore.VectorStore](ctx, s.store, kbstore.KindStore, "")
	if err != nil {
		return err
	}
	attrs := map[kbstore.ChunkRef]map[string]any{}
	err = s.store.List(ctx, kbstore.KindStoreFile, "", func(_ string, body []byte) error {
		var sf kbstore.StoreFile
		if json.Unmarshal(body, &sf) == nil && sf.Status == kbstore.Completed {
			attrs[kbstore.ChunkRef{Store: sf.StoreID, File: sf.FileID}] = sf.Attributes
		}
		return nil
	})
	if err != nil {
		return err
	}
	batch := make([]kbindex.Entry, 0, 1024)
	err = s.store.EachChunk(ctx, func(c kbstore.Chunk) error {
		a, ok := attrs[kbstore.ChunkRef{Store: c.Store, File: c.File}]
		if !ok {
			return nil // a file still in progress, or one whose ingestion was cut
		}
		batch = append(batch, kbindex.Entry{Ref: kbstore.ChunkRef{Store: c.Store, File: c.File, Seq: c.Seq}, Text: c.Text, Vector: c.Vector, Attrs: a})
		if len(batch) == cap(batch) {
			ix.Add(batch)
			batch = batch[:0]
		}
		return nil
	})
	ix.Add(batch)
	for _, vs := range stores {
		s.noteVersion(vs.ID, vs.Version) // read before its files: the index holds at least this
	}
	return err
}

// watch applies the changes other nodes make to the index.
func (s *service) watch() {
	for s.ctx.Err() == nil {
		err := s.store.Watch(s.ctx, s.apply)
		if err == nil || s.ctx.Err() != nil {
			return
		}
		s.log().Warn("knowledge bases: watching other nodes' changes", zap.Error(err))
		sleep(s.ctx, time.Second)
	}
}

// apply brings the index in step with one change another node made.
func (s *service) apply(c kbstore.Change) {
	ctx := s.ctx
	switch c.Op {
	case "delete_file":
		s.index().RemoveFile(c.Store, c.File)
	case "delete_store":
		s.index().RemoveStore(c.Store)
	case "chunks":
		s.reindexFile(ctx, c.Store, c.File)
	case "record":
		// A file's chunks are written before it is marked completed, so
		// the "chunks" change finds it in progress: its completion (or
		// new attributes, or its leaving) is this record's change.
		if store, file, ok := cutLast(c.ID); ok && c.Kind == kbstore.KindStoreFile {
			s.reindexFile(ctx, store, file)
		}
		if c.Kind == kbstore.KindStore {
			if vs, err := getVectorStore(ctx, s.store, c.ID); err == nil {
				s.noteVersion(vs.ID, vs.Version) // after its files' notices
			}
		}
	case "resync":
		s.resync(ctx)
	}
}

// resync builds the index afresh when changes were missed (PostgreSQL
// restarted), swapping it in once built so that searches meanwhile use
// the old one. This node's own changes made during the build (which no
// notice brings back) send it round again.
func (s *service) resync(ctx context.Context) {
	for range 3 {
		before := s.changes.Load()
		ix := kbindex.New()
		if err := s.load(ctx, ix); err != nil {
			s.log().Warn("knowledge bases: reloading the index", zap.Error(err))
			return
		}
		if s.changes.Load() == before {
			s.ix.Store(ix)
			return
		}
	}
	s.log().Warn("knowledge bases: the index kept changing while it was rebuilt; it is rebuilt at the next resync")
}

// reindexFile reads a completed file's chunks from the store into the
// index, replacing what the index had of it.
func (s *service) reindexFile(ctx context.Context, store, file string) {
	sf, err := getStoreFile(ctx, s.store, kbstore.StoreFileID(store, file))
	if err != nil || sf.Status != kbstore.Completed {
		s.index().RemoveFile(store, file)
		return
	}
	refs := make([]kbstore.ChunkRef, sf.Chunks)
	for i := range refs {
		refs[i] = kbstore.ChunkRef{Store: store, File: file, Seq: i}
	}
	chunks, err := s.store.Chunks(ctx, refs)
	if err != nil {
		s.log().Warn("knowledge bases: reading a file's chunks", zap.String("file", file), zap.Error(err))
		return
	}
	entries := make([]kbindex.Entry, len(chunks))
	for i, c := range chunks {
		entries[i] = kbindex.Entry{Ref: kbstore.ChunkRef{Store: c.Store, File: c.File, Seq: c.Seq}, Text: c.Text, Vector: c.Vector, Attrs: sf.Attributes}
	}
	s.index().RemoveFile(store, file)
	s.index().Add(entries)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
