package llmkb

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// batchObject is OpenAI's Vector Store File Batch object.
type batchObject struct {
	ID            string     `json:"id"`
	Object        string     `json:"object"`
	CreatedAt     int64      `json:"created_at"`
	VectorStoreID string     `json:"vector_store_id"`
	Status        string     `json:"status"`
	FileCounts    fileCounts `json:"file_counts"`
}

// batchObjectOf describes a batch with its files' states: in progress
// while one is, else completed (or cancelled when it was).
func (s *service) batchObjectOf(ctx context.Context, b *kbstore.Batch) (batchObject, error) {
	o := batchObject{ID: b.ID, Object: "vector_store.files_batch", CreatedAt: b.CreatedAt.Unix(), VectorStoreID: b.StoreID, Status: kbstore.Completed}
	files, err := list[kbstore.StoreFile](ctx, s.store, kbstore.KindStoreFile, b.StoreID+"/")
	if err != nil {
		return o, err
	}
	for _, sf := range files {
		if sf.BatchID == b.ID {
			o.FileCounts.add(sf.Status)
		}
	}
	switch {
	case o.FileCounts.InProgress > 0:
		o.Status = kbstore.InProgress
	case b.Status == kbstore.Cancelled:
		o.Status = kbstore.Cancelled
	case o.FileCounts.Total > 0 && o.FileCounts.Failed == o.FileCounts.Total:
		o.Status = kbstore.Failed
	}
	return o, nil
}

// batchRequest creates a batch: file_ids with shared attributes and
// chunking, or files each with their own.
type batchRequest struct {
	FileIDs          []string        `json:"file_ids"`
	Attributes       map[string]any  `json:"attributes"`
	ChunkingStrategy json.RawMessage `json:"chunking_strategy"`
	Files            []struct {
		FileID           string          `json:"file_id"`
		Attributes       map[string]any  `json:"attributes"`
		ChunkingStrategy json.RawMessage `json:"chunking_strategy"`
	} `json:"files"`
}

// createBatch is POST /v1/vector_stores/{id}/file_batches.
func (k *KB) createBatch(w http.ResponseWriter, r *http.Request, ids []string) {
	vs, ok := k.readStore(w, r, ids[0], true)
	if !ok {
		return
	}
	var req batchRequest
	if !decode(w, r, &req) {
		return
	}
	items, ok := k.batchItems(w, r, &req)
	if !ok {
		return
	}
	b := &kbstore.Batch{ID: "vsfb_" + randID(24), StoreID: vs.ID, Owner: vs.Owner, Status: kbstore.InProgress, CreatedAt: time.Now().UTC()}
	for _, it := range items {
		b.FileIDs = append(b.FileIDs, it.file.ID)
	}
	if err := put(r.Context(), k.svc.store, kbstore.KindBatch, kbstore.StoreFileID(vs.ID, b.ID), b); err != nil {
		writeErr(w, serverError("recording the batch", err))
		return
	}
	for _, it := range items {
		if _, err := k.svc.addFile(r.Context(), vs, it.file, it.attrs, it.chunking, b.ID); err != nil {
			writeErr(w, serverError("adding the batch's files", err))
			return
		}
	}
	k.answerBatch(w, r, b)
}

// batchItem is one file of a batch with its settings.
type batchItem struct {
	file     *kbstore.File
	attrs    map[string]any
	chunking kbstore.Chunking
}

// batchItems checks a batch request and reads its files.
func (k *KB) batchItems(w http.ResponseWriter, r *http.Request, req *batchRequest) ([]batchItem, bool) {
	if (len(req.FileIDs) == 0) == (len(req.Files) == 0) {
		writeErr(w, badParam("file_ids", "give the batch's files either as file_ids or as files (each with its own attributes), one of the two"))
		return nil, false
	}
	chunking, e := parseChunking(req.ChunkingStrategy, "chunking_strategy")
	if e == nil {
		e = checkAttributes(req.Attributes, "attributes")
	}
	ids := req.FileIDs
	for _, f := range req.Files {
		ids = append(ids, f.FileID)
	}
	files, fe := k.ownFiles(r, ids, "file_ids")
	if e == nil {
		e = fe
	}
	if e != nil {
		writeErr(w, e)
		return nil, false
	}
	items := make([]batchItem, len(files))
	for i, f := range files {
		items[i] = batchItem{file: f, attrs: req.Attributes, chunking: chunking}
		if len(req.Files) == 0 {
			continue
		}
		param := fmt.Sprintf("files[%d]", i)
		if items[i].chunking, e = parseChunking(req.Files[i].ChunkingStrategy, param+".chunking_strategy"); e == nil {
			e = checkAttributes(req.Files[i].Attributes, param+".attributes")
		}
		if e != nil {
			writeErr(w, e)
			return nil, false
		}
		items[i].attrs = req.Files[i].Attributes
	}
	return items, true
}

// answerBatch writes a batch's object.
func (k *KB) answerBatch(w http.ResponseWriter, r *http.Request, b *kbstore.Batch) {
	o, err := k.svc.batchObjectOf(r.Context(), b)
	if err != nil {
		writeErr(w, serverError("reading the batch's files", err))
		return
	}
	if o.Status == kbstore.InProgress {
		w.Header().Set("openai-poll-after-ms", fmt.Sprint(pollAfter.Milliseconds()))
	}
	writeJSON(w, http.StatusOK, o)
}

// readBatch reads a batch of a store the caller sees, or writes the 404.
func (k *KB) readBatch(w http.ResponseWriter, r *http.Request, ids []string, writing bool) (*kbstore.Batch, bool) {
	if _, ok := k.readStore(w, r, ids[0], writing); !ok {
		return nil, false
	}
	b := new(kbstore.Batch)
	if err := get(r.Context(), k.svc.store, kbstore.KindBatch, kbstore.StoreFileID(ids[0], ids[1]), b); err != nil {
		writeErr(w, storeErr(err, "file batch in vector store "+ids[0], ids[1], "reading the batch"))
		return nil, false
	}
	return b, true
}

// getBatch is GET /v1/vector_stores/{id}/file_batches/{batch_id}.
func (k *KB) getBatch(w http.ResponseWriter, r *http.Request, ids []string) {
	if b, ok := k.readBatch(w, r, ids, false); ok {
		k.answerBatch(w, r, b)
	}
}

// cancelBatch is POST …/file_batches/{batch_id}/cancel: its files not yet
// ingested are cancelled.
func (k *KB) cancelBatch(w http.ResponseWriter, r *http.Request, ids []string) {
	b, ok := k.readBatch(w, r, ids, true)
	if !ok {
		return
	}
	b.Status = kbstore.Cancelled
	if err := put(r.Context(), k.svc.store, kbstore.KindBatch, kbstore.StoreFileID(ids[0], ids[1]), b); err != nil {
		writeErr(w, serverError("cancelling the batch", err))
		return
	}
	for _, id := range b.FileIDs {
		if err := k.svc.cancelFile(r.Context(), b.StoreID, id); err != nil {
			writeErr(w, serverError("cancelling the batch's files", err))
			return
		}
	}
	k.answerBatch(w, r, b)
}

// listBatchFiles is GET …/file_batches/{batch_id}/files.
func (k *KB) listBatchFiles(w http.ResponseWriter, r *http.Request, ids []string) {
	if b, ok := k.readBatch(w, r, ids, false); ok {
		k.answerFiles(w, r, b.StoreID, b.ID)
	}
}
