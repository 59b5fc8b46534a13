package llmkb

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// fileCounts is a store's or batch's files by state.
type fileCounts struct {
	InProgress int `json:"in_progress"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	Cancelled  int `json:"cancelled"`
	Total      int `json:"total"`
}

func (fc *fileCounts) add(status string) {
	switch status {
	case kbstore.InProgress:
		fc.InProgress++
	case kbstore.Completed:
		fc.Completed++
	case kbstore.Failed:
		fc.Failed++
	case kbstore.Cancelled:
		fc.Cancelled++
	}
	fc.Total++
}

// storeObject is OpenAI's Vector Store object.
type storeObject struct {
	ID           string                `json:"id"`
	Object       string                `json:"object"`
	CreatedAt    int64                 `json:"created_at"`
	Name         string                `json:"name"`
	UsageBytes   int64                 `json:"usage_bytes"`
	FileCounts   fileCounts            `json:"file_counts"`
	Status       string                `json:"status"`
	ExpiresAfter *kbstore.ExpiresAfter `json:"expires_after"`
	ExpiresAt    *int64                `json:"expires_at"`
	LastActiveAt int64                 `json:"last_active_at"`
	Metadata     map[string]string     `json:"metadata"`
}

// storeObjectOf describes a store with its files' counts and bytes.
func (s *service) storeObjectOf(ctx context.Context, vs *kbstore.VectorStore) (storeObject, error) {
	o := storeObject{ID: vs.ID, Object: "vector_store", CreatedAt: vs.CreatedAt.Unix(), Name: vs.Name,
		ExpiresAfter: vs.ExpiresAfter, LastActiveAt: vs.LastActiveAt.Unix(), Metadata: vs.Metadata, Status: kbstore.Completed}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	files, err := list[kbstore.StoreFile](ctx, s.store, kbstore.KindStoreFile, vs.ID+"/")
	if err != nil {
		return o, err
	}
	for _, sf := range files {
		o.FileCounts.add(sf.Status)
		o.UsageBytes += sf.UsageBytes
	}
	if o.FileCounts.InProgress > 0 {
		o.Status = kbstore.InProgress
	}
	if !vs.ExpiresAt.IsZero() {
		t := vs.ExpiresAt.Unix()
		o.ExpiresAt = &t
		if time.Now().After(vs.ExpiresAt) {
			o.Status = "expired"
		}
	}
	return o, nil
}

// storeRequest is the body of creating or changing a store.
type storeRequest struct {
	Name             *string               `json:"name"`
	FileIDs          []string              `json:"file_ids"`
	ExpiresAfter     *kbstore.ExpiresAfter `json:"expires_after"`
	ChunkingStrategy json.RawMessage       `json:"chunking_strategy"`
	Metadata         map[string]string     `json:"metadata"`
	// Share is llmgw's: "team" or "org" makes a store that the projects
	// below that level of the caller's key read too.
	Share string `json:"share"`
}

// check checks the fields OpenAI bounds.
func (sr *storeRequest) check() *openai.Error {
	if sr.Name != nil && utf8.RuneCountInString(*sr.Name) > 256 {
		return badParam("name", "the name is longer than 256 characters")
	}
	if len(sr.Metadata) > 16 {
		return badParam("metadata", "metadata has %d keys: at most 16", len(sr.Metadata))
	}
	for key, v := range sr.Metadata {
		if len(key) > 64 || len(v) > 512 {
			return badParam("metadata", "metadata %q: keys are at most 64 characters and values at most 512", key)
		}
	}
	if ea := sr.ExpiresAfter; ea != nil && (ea.Anchor != "last_active_at" || ea.Days < 1 || ea.Days > 365) {
		return badParam("expires_after", `expires_after: give {"anchor": "last_active_at", "days": 1 to 365}`)
	}
	switch sr.Share {
	case "", "project", "team", "org":
	default:
		return badParam("share", "share %q: use team or org (the projects below that level of your key read the store), or leave it out", sr.Share)
	}
	return nil
}

// parseChunking reads a chunking_strategy: auto (800/400) or static with
// its sizes.
func parseChunking(raw json.RawMessage, param string) (kbstore.Chunking, *openai.Error) {
	auto := kbstore.Chunking{Type: "auto", MaxTokens: 800, OverlapTokens: 400}
	if len(raw) == 0 || string(raw) == "null" {
		return auto, nil
	}
	var cs struct {
		Type   string `json:"type"`
		Static *struct {
			Max     int `json:"max_chunk_size_tokens"`
			Overlap int `json:"chunk_overlap_tokens"`
		} `json:"static"`
	}
	if err := json.Unmarshal(raw, &cs); err != nil {
		return auto, badParam(param, "%s: %s", param, openai.DecodeProblem(err))
	}
	switch {
	case cs.Type == "auto":
		return auto, nil
	case cs.Type != "static":
		return auto, badParam(param+".type", `%s.type %q: use "auto" or "static"`, param, cs.Type)
	case cs.Static == nil:
		return auto, badParam(param+".static", `%s: a static strategy needs "static": {"max_chunk_size_tokens": …, "chunk_overlap_tokens": …}`, param)
	}
	if err := kbindex.ValidateChunking(cs.Static.Max, cs.Static.Overlap); err != nil {
		return auto, badParam(param+".static", "%s.static: %v", param, err)
	}
	return kbstore.Chunking{Type: "static", MaxTokens: cs.Static.Max, OverlapTokens: cs.Static.Overlap}, nil
}

// createStore is POST /v1/vector_stores.
func (k *KB) createStore(w http.ResponseWriter, r *http.Request, _ []string) {
	var sr storeRequest
	if !decode(w, r, &sr) {
		return
	}
	chunking, e := parseChunking(sr.ChunkingStrategy, "chunking_strategy")
	if e == nil {
		e = sr.check()
	}
	if e != nil {
		writeErr(w, e)
		return
	}
	c := callerOf(r)
	now := time.Now().UTC()
	vs := &kbstore.VectorStore{ID: "vs_" + randID(24), Owner: c.ownerFor(sr.Share), Name: deref(sr.Name), Metadata: sr.Metadata,
		Embedder: k.Embedder, Chunking: chunking, ExpiresAfter: sr.ExpiresAfter, CreatedAt: now, LastActiveAt: now}
	if vs.Owner != c.project {
		vs.Shared, vs.Creator = true, c.project
	}
	vs.ExpiresAt = expiry(vs)
	files, e := k.ownFiles(r, sr.FileIDs, "file_ids")
	if e != nil {
		writeErr(w, e)
		return
	}
	if err := put(r.Context(), k.svc.store, kbstore.KindStore, vs.ID, vs); err != nil {
		writeErr(w, serverError("recording the vector store", err))
		return
	}
	for _, f := range files {
		if _, err := k.svc.addFile(r.Context(), vs, f, nil, chunking, ""); err != nil {
			writeErr(w, serverError("adding a file to the vector store", err))
			return
		}
	}
	k.answerStore(w, r, vs)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// expiry is when a store expires under its policy, or zero.
func expiry(vs *kbstore.VectorStore) time.Time {
	if vs.ExpiresAfter == nil {
		return time.Time{}
	}
	return vs.LastActiveAt.Add(time.Duration(vs.ExpiresAfter.Days) * 24 * time.Hour)
}

// ownFiles reads files the caller owns by id; param names the list.
func (k *KB) ownFiles(r *http.Request, ids []string, param string) ([]*kbstore.File, *openai.Error) {
	if len(ids) > 500 {
		return nil, badParam(param, "%s has %d files: at most 500 at once (add more with file batches)", param, len(ids))
	}
	c := callerOf(r)
	files := make([]*kbstore.File, 0, len(ids))
	for _, id := range ids {
		f, err := getFile(r.Context(), k.svc.store, id)
		if err == nil && !c.ownsFile(f) {
			err = kbstore.ErrNotFound
		}
		if err != nil {
			e := storeErr(err, "file", id, "reading a file")
			e.Param = param
			return nil, e
		}
		files = append(files, f)
	}
	return files, nil
}

// answerStore writes a store's object.
func (k *KB) answerStore(w http.ResponseWriter, r *http.Request, vs *kbstore.VectorStore) {
	o, err := k.svc.storeObjectOf(r.Context(), vs)
	if err != nil {
		writeErr(w, serverError("reading the vector store's files", err))
		return
	}
	writeJSON(w, http.StatusOK, o)
}

// readStore reads a store the caller sees (for writing: may change), or
// writes the 404 (a store it sees but may not change: 403).
func (k *KB) readStore(w http.ResponseWriter, r *http.Request, id string, writing bool) (*kbstore.VectorStore, bool) {
	vs, err := getVectorStore(r.Context(), k.svc.store, id)
	c := callerOf(r)
	if err == nil && !c.sees(vs) {
		err = kbstore.ErrNotFound
	}
	if err != nil {
		writeErr(w, storeErr(err, "vector store", id, "reading the vector store"))
		return nil, false
	}
	if writing && !c.changes(vs) {
		writeErr(w, &openai.Error{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "store_read_only",
			Message: "vector store " + id + " is shared with your project to read: only the project that made it (" + vs.Creator + ") may change it"})
		return nil, false
	}
	return vs, true
}

// listStores is GET /v1/vector_stores: the stores the caller sees.
func (k *KB) listStores(w http.ResponseWriter, r *http.Request, _ []string) {
	p, e := pagingOf(r)
	if e != nil {
		writeErr(w, e)
		return
	}
	stores, err := list[kbstore.VectorStore](r.Context(), k.svc.store, kbstore.KindStore, "")
	if err != nil {
		writeErr(w, serverError("listing vector stores", err))
		return
	}
	c := callerOf(r)
	var out []storeObject
	for _, vs := range stores {
		if !c.sees(vs) {
			continue
		}
		o, err := k.svc.storeObjectOf(r.Context(), vs)
		if err != nil {
			writeErr(w, serverError("reading a vector store's files", err))
			return
		}
		out = append(out, o)
	}
	writeJSON(w, http.StatusOK, paginate(out, p, func(o storeObject) (int64, string) { return o.CreatedAt, o.ID }))
}

// getStore is GET /v1/vector_stores/{id}.
func (k *KB) getStore(w http.ResponseWriter, r *http.Request, ids []string) {
	if vs, ok := k.readStore(w, r, ids[0], false); ok {
		k.answerStore(w, r, vs)
	}
}

// modifyStore is POST /v1/vector_stores/{id}: name, expires_after,
// metadata.
func (k *KB) modifyStore(w http.ResponseWriter, r *http.Request, ids []string) {
	vs, ok := k.readStore(w, r, ids[0], true)
	if !ok {
		return
	}
	var sr storeRequest
	if !decode(w, r, &sr) {
		return
	}
	if e := sr.check(); e != nil {
		writeErr(w, e)
		return
	}
	err := update(r.Context(), k.svc.store, kbstore.KindStore, vs.ID, func(cur *kbstore.VectorStore) (*kbstore.VectorStore, error) {
		if cur == nil {
			return nil, kbstore.ErrNotFound
		}
		if sr.Name != nil {
			cur.Name = *sr.Name
		}
		if sr.Metadata != nil {
			cur.Metadata = sr.Metadata
		}
		if sr.ExpiresAfter != nil {
			cur.ExpiresAfter = sr.ExpiresAfter
			cur.ExpiresAt = expiry(cur)
		}
		vs = cur
		return cur, nil
	})
	if err != nil {
		writeErr(w, storeErr(err, "vector store", ids[0], "changing the vector store"))
		return
	}
	k.answerStore(w, r, vs)
}

// deleteStore is DELETE /v1/vector_stores/{id}: its chunks, vectors and
// records go; the files stay (they may be in other stores).
func (k *KB) deleteStore(w http.ResponseWriter, r *http.Request, ids []string) {
	vs, ok := k.readStore(w, r, ids[0], true)
	if !ok {
		return
	}
	if err := k.svc.removeStore(r.Context(), vs.ID); err != nil {
		writeErr(w, serverError("deleting the vector store", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": vs.ID, "object": "vector_store.deleted", "deleted": true})
}

// storeIDs splits a comma-separated list of store ids.
func storeIDs(s string) []string {
	var out []string
	for _, id := range strings.Split(s, ",") {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}
