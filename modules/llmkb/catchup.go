package llmkb

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// catchUpWait is how long a search waits for this node's index to follow
// changes another node made to a store before reading them itself.
const catchUpWait = 2 * time.Second

// noteVersion records that this node's index holds a store's changes up
// to version v: a change notice of the store's record (which comes after
// those of its files), this node's own change, or a load.
func (s *service) noteVersion(store string, v int64) {
	for {
		cur, ok := s.versions.Load(store)
		if ok && cur.(int64) >= v {
			return
		}
		if (!ok && s.versionsAdd(store, v)) || (ok && s.versions.CompareAndSwap(store, cur, v)) {
			return
		}
	}
}

func (s *service) versionsAdd(store string, v int64) bool {
	_, loaded := s.versions.LoadOrStore(store, v)
	return !loaded
}

// caughtUp makes sure this node's index holds every change to the store
// up to the version just read from the store, so that a store changed
// through another node is searched as it is now: it waits a moment for
// the change notices, then reads the store's files itself.
func (s *service) caughtUp(ctx context.Context, vs *kbstore.VectorStore) {
	deadline := time.Now().Add(catchUpWait)
	for s.version(vs.ID) < vs.Version {
		if time.Now().After(deadline) {
			s.reindexStore(ctx, vs)
			return
		}
		sleep(ctx, 10*time.Millisecond)
		if ctx.Err() != nil {
			return
		}
	}
}

func (s *service) version(store string) int64 {
	v, _ := s.versions.Load(store)
	n, _ := v.(int64)
	return n
}

// reindexStore reads every completed file of a store into the index.
func (s *service) reindexStore(ctx context.Context, vs *kbstore.VectorStore) {
	files, err := list[kbstore.StoreFile](ctx, s.store, kbstore.KindStoreFile, vs.ID+"/")
	if err != nil {
		s.log().Warn("knowledge bases: reading a store's files to catch up", zap.String("store", vs.ID), zap.Error(err))
		return
	}
	for _, sf := range files {
		s.reindexFile(ctx, sf.StoreID, sf.FileID)
	}
	s.noteVersion(vs.ID, vs.Version)
}
