package llmkb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// finish records how a file's ingestion ended: completed with its chunks
// (and indexes them), failed for a reason in the file, or left in
// progress to be taken again when the gateway stops or a part it needs
// (the store, the embedder) failed and attempts remain.
func (s *service) finish(ctx context.Context, sf *kbstore.StoreFile, chunks []kbstore.Chunk, err error) error {
	var fail *failure
	switch {
	case err == nil:
		return s.complete(ctx, sf, chunks)
	case errors.As(err, &fail):
		return s.fail(ctx, sf, fail.LastError)
	case errors.Is(err, errLost):
		return s.dropChunks(ctx, sf)
	case ctx.Err() != nil:
		return nil // stopping: the file is taken again at the next start
	case sf.Attempts < maxAttempts:
		s.spawn(func() { sleep(s.ctx, 5*time.Second); s.queue.push(kbstore.StoreFileID(sf.StoreID, sf.FileID)) })
		return err
	}
	return s.fail(ctx, sf, kbstore.LastError{Code: "server_error", Message: err.Error()})
}

// complete indexes a file's chunks and marks it completed, unless it left
// the store meanwhile (then its chunks go). The index has them before the
// record says completed, so that whoever sees the file completed finds it.
func (s *service) complete(ctx context.Context, sf *kbstore.StoreFile, chunks []kbstore.Chunk) error {
	var usage int64
	dims := 0
	entries := make([]kbindex.Entry, len(chunks))
	for i, c := range chunks {
		usage += int64(len(c.Text) + 4*len(c.Vector))
		dims = len(c.Vector)
		entries[i] = kbindex.Entry{Ref: kbstore.ChunkRef{Store: c.Store, File: c.File, Seq: c.Seq}, Text: c.Text, Vector: c.Vector, Attrs: sf.Attributes}
	}
	s.changed().RemoveFile(sf.StoreID, sf.FileID)
	s.changed().Add(entries)
	var done *kbstore.StoreFile
	err := update(ctx, s.store, kbstore.KindStoreFile, kbstore.StoreFileID(sf.StoreID, sf.FileID), func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		done = nil
		if cur == nil || cur.Status != kbstore.InProgress || cur.Worker != s.node {
			return cur, nil
		}
		cur.Status, cur.LastError, cur.UsageBytes, cur.Chunks, cur.Tokens = kbstore.Completed, nil, usage, len(chunks), sf.Tokens
		cur.Worker, cur.LeaseUntil = "", time.Time{}
		done = cur
		return cur, nil
	})
	if err != nil || done == nil {
		s.changed().RemoveFile(sf.StoreID, sf.FileID)
		if err != nil {
			return err
		}
		return s.dropChunks(ctx, sf)
	}
	s.changed().SetAttributes(sf.StoreID, sf.FileID, done.Attributes) // changed while it was read
	metricIngested.WithLabelValues(kbstore.Completed).Inc()
	if dims > 0 {
		s.noteDims(ctx, sf.StoreID, dims)
	}
	return s.bumpVersion(ctx, sf.StoreID)
}

// fail marks a file failed with why.
func (s *service) fail(ctx context.Context, sf *kbstore.StoreFile, why kbstore.LastError) error {
	err := update(ctx, s.store, kbstore.KindStoreFile, kbstore.StoreFileID(sf.StoreID, sf.FileID), func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		if cur == nil || cur.Status != kbstore.InProgress {
			return cur, nil
		}
		cur.Status, cur.LastError, cur.Worker, cur.LeaseUntil = kbstore.Failed, &why, "", time.Time{}
		return cur, nil
	})
	if err != nil {
		return err
	}
	metricIngested.WithLabelValues(kbstore.Failed).Inc()
	return s.store.DeleteChunks(ctx, sf.StoreID, sf.FileID)
}

// dropChunks deletes the chunks of a file that is no longer in the store
// (or no longer this node's to ingest).
func (s *service) dropChunks(ctx context.Context, sf *kbstore.StoreFile) error {
	cur, err := getStoreFile(ctx, s.store, kbstore.StoreFileID(sf.StoreID, sf.FileID))
	if err == nil && (cur.Status == kbstore.Completed || cur.Worker != s.node) {
		return nil // done, or being done, by another node: its chunks are its own
	}
	return s.store.DeleteChunks(ctx, sf.StoreID, sf.FileID)
}

// noteDims records the length of a store's vectors the first time.
func (s *service) noteDims(ctx context.Context, store string, dims int) {
	_ = update(ctx, s.store, kbstore.KindStore, store, func(cur *kbstore.VectorStore) (*kbstore.VectorStore, error) {
		if cur != nil && cur.Dims == 0 {
			cur.Dims = dims
		}
		return cur, nil
	})
}

// sweep queues the files in progress that no node holds (at start: those
// cut by a stop; later: those of a node that stopped), and now and then
// deletes files past their expiry.
func (s *service) sweep() {
	var lastExpiry time.Time
	for s.ctx.Err() == nil {
		err := s.resume(s.ctx)
		if err == nil && time.Since(lastExpiry) > expireEvery {
			lastExpiry = time.Now()
			err = s.expire(s.ctx)
		}
		if err != nil && s.ctx.Err() == nil {
			s.log().Warn("knowledge bases: looking for files to ingest or expire", zap.Error(err))
		}
		sleep(s.ctx, sweepEvery)
	}
}

// resume queues the files in progress that this node held or whose
// holder's lease ran out.
func (s *service) resume(ctx context.Context) error {
	now := time.Now()
	return s.store.List(ctx, kbstore.KindStoreFile, "", func(id string, body []byte) error {
		if !bytes.Contains(body, []byte(kbstore.InProgress)) {
			return nil // most files are done: not decoded
		}
		var sf kbstore.StoreFile
		if json.Unmarshal(body, &sf) == nil && sf.Status == kbstore.InProgress && (sf.Worker == s.node || now.After(sf.LeaseUntil)) {
			s.queue.push(id)
		}
		return nil
	})
}

// expire deletes the files past their expires_after.
func (s *service) expire(ctx context.Context) error {
	now := time.Now()
	files, err := list[kbstore.File](ctx, s.store, kbstore.KindFile, "")
	if err != nil {
		return err
	}
	for _, f := range files {
		if !f.ExpiresAt.IsZero() && now.After(f.ExpiresAt) {
			if err := s.removeFile(ctx, f.ID); err != nil {
				return err
			}
		}
	}
	return nil
}
