package llmkb

import (
	"context"
	"errors"
	"time"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// addFile puts a file in a store (in progress) and queues it; a file
// already there is left as it is.
func (s *service) addFile(ctx context.Context, vs *kbstore.VectorStore, f *kbstore.File, attrs map[string]any, chunking kbstore.Chunking, batch string) (*kbstore.StoreFile, error) {
	id := kbstore.StoreFileID(vs.ID, f.ID)
	var out *kbstore.StoreFile
	err := update(ctx, s.store, kbstore.KindStoreFile, id, func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		if cur != nil && batch == "" {
			out = cur
			return cur, nil
		}
		out = &kbstore.StoreFile{StoreID: vs.ID, FileID: f.ID, Owner: vs.Owner, Status: kbstore.InProgress, Attributes: attrs,
			Chunking: chunking, BatchID: batch, CreatedAt: time.Now().UTC()}
		return out, nil
	})
	if err == nil && out.Status == kbstore.InProgress {
		s.queue.push(id)
	}
	return out, err
}

// setAttributes changes a file's attributes in a store and the index.
func (s *service) setAttributes(ctx context.Context, store, file string, attrs map[string]any) (*kbstore.StoreFile, error) {
	var out *kbstore.StoreFile
	err := update(ctx, s.store, kbstore.KindStoreFile, kbstore.StoreFileID(store, file), func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		if cur == nil {
			return nil, kbstore.ErrNotFound
		}
		cur.Attributes = attrs
		out = cur
		return cur, nil
	})
	if err == nil {
		s.changed().SetAttributes(store, file, attrs)
	}
	return out, err
}

// cancelFile cancels a file of a store still in progress.
func (s *service) cancelFile(ctx context.Context, store, file string) error {
	err := update(ctx, s.store, kbstore.KindStoreFile, kbstore.StoreFileID(store, file), func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
		if cur == nil || cur.Status != kbstore.InProgress {
			return cur, nil
		}
		cur.Status = kbstore.Cancelled
		return cur, nil
	})
	if errors.Is(err, kbstore.ErrNotFound) {
		return nil
	}
	return err
}

// removeStoreFile takes a file out of a store: record, chunks, index.
func (s *service) removeStoreFile(ctx context.Context, store, file string) error {
	if err := s.store.Delete(ctx, kbstore.KindStoreFile, kbstore.StoreFileID(store, file)); err != nil && !errors.Is(err, kbstore.ErrNotFound) {
		return err
	}
	if err := s.store.DeleteChunks(ctx, store, file); err != nil {
		return err
	}
	s.changed().RemoveFile(store, file)
	return s.bumpVersion(ctx, store)
}

// removeFile takes a file out of every store, then deletes its record
// and bytes.
func (s *service) removeFile(ctx context.Context, file string) error {
	var stores []string
	err := s.store.List(ctx, kbstore.KindStoreFile, "", func(id string, _ []byte) error {
		if st, f, ok := cutLast(id); ok && f == file {
			stores = append(stores, st)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, st := range stores {
		if err := s.removeStoreFile(ctx, st, file); err != nil {
			return err
		}
	}
	if err := s.blobs.DeleteBlob(ctx, file); err != nil && !errors.Is(err, kbstore.ErrNotFound) {
		return err
	}
	return s.store.Delete(ctx, kbstore.KindFile, file)
}

// removeStore deletes a store's files' records, chunks and batches, then
// the store.
func (s *service) removeStore(ctx context.Context, store string) error {
	for _, kind := range []string{kbstore.KindStoreFile, kbstore.KindBatch} {
		var ids []string
		err := s.store.List(ctx, kind, store+"/", func(id string, _ []byte) error { ids = append(ids, id); return nil })
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := s.store.Delete(ctx, kind, id); err != nil && !errors.Is(err, kbstore.ErrNotFound) {
				return err
			}
		}
	}
	if err := s.store.DeleteChunks(ctx, store, ""); err != nil {
		return err
	}
	s.changed().RemoveStore(store)
	return s.store.Delete(ctx, kbstore.KindStore, store)
}

// bumpVersion counts a change to a store's files, for the answers
// cached from its searches.
func (s *service) bumpVersion(ctx context.Context, store string) error {
	err := update(ctx, s.store, kbstore.KindStore, store, func(cur *kbstore.VectorStore) (*kbstore.VectorStore, error) {
		if cur == nil {
			return nil, nil
		}
		cur.Version++
		s.noteVersion(store, cur.Version) // may run again: the last run's is the one written
		return cur, nil
	})
	return err
}

// cutLast splits "store/file".
func cutLast(id string) (string, string, bool) {
	for i := len(id) - 1; i >= 0; i-- {
		if id[i] == '/' {
			return id[:i], id[i+1:], true
		}
	}
	return "", "", false
}
