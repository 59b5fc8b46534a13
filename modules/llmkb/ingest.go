package llmkb

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llmkb/docread"
	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

const (
	ingestWorkers = 2               // files read and chunked at once
	maxAttempts   = 3               // ingestions started before a file fails
	embedBatch    = 32              // chunks per embedding call
	sweepEvery    = 5 * time.Second // files whose lease ran out are looked for
	expireEvery   = 5 * time.Minute // files past their expiry are looked for
)

// work ingests the queued files until the service stops.
func (s *service) work() {
	for {
		id, ok := s.queue.pop()
		if !ok {
			return
		}
		if err := s.ingest(s.ctx, id); err != nil && s.ctx.Err() == nil {
			s.log().Warn("knowledge bases: ingesting a file", zap.String("file", id), zap.Error(err))
		}
	}
}

// failure is an ingestion that failed for a reason in the file: it is
// recorded on the file, not retried.
type failure struct{ kbstore.LastError }

func (f *failure) Error() string { return f.Message }

// ingest reads, chunks, embeds and indexes one file of a store, unless
// another node holds it or it is no longer in progress.
func (s *service) ingest(ctx context.Context, id string) error {
	if _, busy := s.busy.LoadOrStore(id, true); busy {
		return nil
	}
	defer s.busy.Delete(id)
	sf, ok, err := s.claim(ctx, id)
	if err != nil || !ok {
		return err
	}
	vs, err := getVectorStore(ctx, s.store, sf.StoreID)
	if err != nil {
		return s.finish(ctx, sf, nil, err)
	}
	chunks, tokens, err := s.chunkFile(ctx, vs, sf)
	if err == nil {
		err = s.store.PutChunks(ctx, sf.StoreID, sf.FileID, chunks)
	}
	if err != nil {
		return s.finish(ctx, sf, nil, err)
	}
	sf.Tokens = tokens
	return s.finish(ctx, sf, chunks, nil)
}

// claim takes a file in progress for this node for a lease, counting the
// attempt; false when another node holds it or it is done.
func (s *service) claim(ctx context.Context, id string) (*kbstore.StoreFile, bool, error) {
	var out *kbstore.StoreFile
	now := time.Now()
	err := update(ctx, s.store, kbstore.KindStoreFile, id, func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		out = nil
		if cur == nil || cur.Status != kbstore.InProgress || (cur.Worker != s.node && now.Before(cur.LeaseUntil)) {
			return cur, nil
		}
		cur.Attempts++
		if cur.Attempts > maxAttempts {
			cur.Status = kbstore.Failed
			cur.LastError = &kbstore.LastError{Code: "server_error",
				Message: fmt.Sprintf("ingestion was cut %d times (the gateway stopped while reading this file); add the file again", maxAttempts)}
			return cur, nil
		}
		cur.Worker, cur.LeaseUntil = s.node, now.Add(s.lease())
		out = cur
		return cur, nil
	})
	if errors.Is(err, kbstore.ErrNotFound) {
		return nil, false, nil
	}
	return out, out != nil, err
}

// chunkFile reads a file's bytes and returns its chunks, embedded when
// the store has an embedder, and the embedding tokens spent.
func (s *service) chunkFile(ctx context.Context, vs *kbstore.VectorStore, sf *kbstore.StoreFile) ([]kbstore.Chunk, int64, error) {
	f, err := getFile(ctx, s.store, sf.FileID)
	if errors.Is(err, kbstore.ErrNotFound) {
		return nil, 0, &failure{kbstore.LastError{Code: "invalid_file", Message: "the file was deleted before it was read"}}
	}
	if err != nil {
		return nil, 0, err
	}
	if vs.Embedder != "" {
		if err := s.checkRoom(ctx, f); err != nil {
			return nil, 0, err
		}
	}
	data, err := s.blobs.GetBlob(ctx, f.ID)
	if err != nil {
		return nil, 0, err
	}
	doc, err := docread.Read(f.Filename, data)
	var de *docread.Error
	if errors.As(err, &de) {
		return nil, 0, &failure{kbstore.LastError{Code: lastErrorCode(de.Code), Message: de.Reason}}
	}
	if err != nil {
		return nil, 0, err
	}
	pieces := kbindex.Chunk(doc, kbindex.ChunkOptions{MaxTokens: sf.Chunking.MaxTokens, OverlapTokens: sf.Chunking.OverlapTokens})
	if len(pieces) == 0 {
		return nil, 0, &failure{kbstore.LastError{Code: "invalid_file", Message: "the file has no text to search"}}
	}
	chunks := make([]kbstore.Chunk, len(pieces))
	for i, p := range pieces {
		chunks[i] = kbstore.Chunk{Store: sf.StoreID, File: sf.FileID, Seq: i, Text: p.Text, Tokens: p.Tokens}
	}
	if vs.Embedder == "" {
		return chunks, 0, nil
	}
	tokens, err := s.embedChunks(ctx, vs.Embedder, f, sf, chunks)
	return chunks, tokens, err
}

// lastErrorCode maps a reader's code to OpenAI's last_error codes.
func lastErrorCode(code string) string {
	if code == "unsupported_file" {
		return "unsupported_file"
	}
	return "invalid_file"
}

// embedChunks embeds chunks in batches, each when the embedder has free
// slots, renewing the file's lease as it goes, and charges each batch's
// tokens to the key that uploaded the file. It returns the tokens spent.
func (s *service) embedChunks(ctx context.Context, model string, f *kbstore.File, sf *kbstore.StoreFile, chunks []kbstore.Chunk) (int64, error) {
	var spent int64
	for i := 0; i < len(chunks); i += embedBatch {
		batch := chunks[i:min(i+embedBatch, len(chunks))]
		texts := make([]string, len(batch))
		var estimate int64
		for j, c := range batch {
			texts[j] = c.Text
			estimate += int64(c.Tokens)
		}
		done, err := s.waitForSlots(ctx, model)
		if err != nil {
			return spent, err
		}
		vecs, used, err := s.app().EmbeddingsUsage(ctx, model, texts)
		done()
		if err != nil {
			return spent, err
		}
		used = cmp.Or(used, estimate) // an embedder that reports no usage
		spent += used
		s.charge(ctx, f.Key, f.Owner, model, used)
		for j := range batch {
			batch[j].Vector = vecs[j]
		}
		if err := s.renew(ctx, sf); err != nil {
			return spent, err
		}
	}
	return spent, nil
}

// waitForSlots paces an import by the embedder's free slots: a batch goes
// while more than half of its ready replicas' slots are free, so that
// interactive requests to the same model always find room; when they are
// busier, one batch at a time still goes while two slots are free, so
// that an import under steady traffic moves on. A model with no ready
// replica is asked at once (the call starts one). The function returned
// ends the batch.
func (s *service) waitForSlots(ctx context.Context, model string) (func(), error) {
	done := func() { s.embedding.Add(-1) }
	wait := 20 * time.Millisecond
	for {
		free, total := s.deps.Load().slots(model)
		if total == 0 || free*2 > total {
			s.embedding.Add(1)
			return done, nil
		}
		if free >= 2 && s.embedding.CompareAndSwap(0, 1) {
			return done, nil
		}
		sleep(ctx, wait)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wait = min(wait*2, 500*time.Millisecond)
	}
}

// renew extends this node's lease on a file it ingests.
func (s *service) renew(ctx context.Context, sf *kbstore.StoreFile) error {
	return update(ctx, s.store, kbstore.KindStoreFile, kbstore.StoreFileID(sf.StoreID, sf.FileID), func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		if cur == nil || cur.Status != kbstore.InProgress || cur.Worker != s.node {
			return cur, errLost
		}
		cur.LeaseUntil = time.Now().Add(s.lease())
		return cur, nil
	})
}

// errLost is a file that left the store, was cancelled or was taken by
// another node while this one ingested it.
var errLost = errors.New("the file left the store or was cancelled while it was ingested")
