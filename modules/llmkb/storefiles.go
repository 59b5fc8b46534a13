package llmkb

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// storeFileObject is OpenAI's Vector Store File object.
type storeFileObject struct {
	ID               string             `json:"id"`
	Object           string             `json:"object"`
	UsageBytes       int64              `json:"usage_bytes"`
	CreatedAt        int64              `json:"created_at"`
	VectorStoreID    string             `json:"vector_store_id"`
	Status           string             `json:"status"`
	LastError        *kbstore.LastError `json:"last_error"`
	ChunkingStrategy chunkingObject     `json:"chunking_strategy"`
	Attributes       map[string]any     `json:"attributes"`
}

// chunkingObject is a file's chunking strategy as OpenAI shows it: static
// with its sizes (auto is shown with the sizes it stands for).
type chunkingObject struct {
	Type   string `json:"type"`
	Static struct {
		Max     int `json:"max_chunk_size_tokens"`
		Overlap int `json:"chunk_overlap_tokens"`
	} `json:"static"`
}

func storeFileObjectOf(sf *kbstore.StoreFile) storeFileObject {
	o := storeFileObject{ID: sf.FileID, Object: "vector_store.file", UsageBytes: sf.UsageBytes, CreatedAt: sf.CreatedAt.Unix(),
		VectorStoreID: sf.StoreID, Status: sf.Status, LastError: sf.LastError, Attributes: sf.Attributes}
	o.ChunkingStrategy.Type = "static"
	o.ChunkingStrategy.Static.Max, o.ChunkingStrategy.Static.Overlap = sf.Chunking.MaxTokens, sf.Chunking.OverlapTokens
	if o.Attributes == nil {
		o.Attributes = map[string]any{}
	}
	return o
}

// storeFileRequest adds a file to a store or changes its attributes.
type storeFileRequest struct {
	FileID           string          `json:"file_id"`
	Attributes       map[string]any  `json:"attributes"`
	ChunkingStrategy json.RawMessage `json:"chunking_strategy"`
}

// checkAttributes checks OpenAI's bounds: at most 16 keys of at most 64
// characters, values strings (at most 512), numbers or booleans.
func checkAttributes(a map[string]any, param string) *openai.Error {
	if len(a) > 16 {
		return badParam(param, "%s has %d keys: at most 16", param, len(a))
	}
	for key, v := range a {
		if len(key) > 64 {
			return badParam(param, "%s key %q is longer than 64 characters", param, key)
		}
		switch v := v.(type) {
		case string:
			if len(v) > 512 {
				return badParam(param, "%s.%s is longer than 512 characters", param, key)
			}
		case float64, bool:
		default:
			return badParam(param, "%s.%s: values are strings, numbers or booleans", param, key)
		}
	}
	return nil
}

// addStoreFile is POST /v1/vector_stores/{id}/files.
func (k *KB) addStoreFile(w http.ResponseWriter, r *http.Request, ids []string) {
	vs, ok := k.readStore(w, r, ids[0], true)
	if !ok {
		return
	}
	var req storeFileRequest
	if !decode(w, r, &req) {
		return
	}
	if req.FileID == "" {
		writeErr(w, badParam("file_id", "file_id is required: upload the file with POST /v1/files, then give its id"))
		return
	}
	chunking, e := parseChunking(req.ChunkingStrategy, "chunking_strategy")
	if e == nil {
		e = checkAttributes(req.Attributes, "attributes")
	}
	if e != nil {
		writeErr(w, e)
		return
	}
	files, e := k.ownFiles(r, []string{req.FileID}, "file_id")
	if e != nil {
		writeErr(w, e)
		return
	}
	sf, err := k.svc.addFile(r.Context(), vs, files[0], req.Attributes, chunking, "")
	if err != nil {
		writeErr(w, serverError("adding the file", err))
		return
	}
	w.Header().Set("openai-poll-after-ms", fmt.Sprint(pollAfter.Milliseconds()))
	writeJSON(w, http.StatusOK, storeFileObjectOf(sf))
}

// readStoreFile reads a file of a store the caller sees, or writes the 404.
func (k *KB) readStoreFile(w http.ResponseWriter, r *http.Request, ids []string, writing bool) (*kbstore.StoreFile, bool) {
	if _, ok := k.readStore(w, r, ids[0], writing); !ok {
		return nil, false
	}
	sf, err := getStoreFile(r.Context(), k.svc.store, kbstore.StoreFileID(ids[0], ids[1]))
	if err != nil {
		writeErr(w, storeErr(err, "file in vector store "+ids[0], ids[1], "reading the file"))
		return nil, false
	}
	return sf, true
}

// getStoreFile is GET /v1/vector_stores/{id}/files/{file_id}.
func (k *KB) getStoreFile(w http.ResponseWriter, r *http.Request, ids []string) {
	if sf, ok := k.readStoreFile(w, r, ids, false); ok {
		if sf.Status == kbstore.InProgress {
			w.Header().Set("openai-poll-after-ms", fmt.Sprint(pollAfter.Milliseconds()))
		}
		writeJSON(w, http.StatusOK, storeFileObjectOf(sf))
	}
}

// updateStoreFile is POST /v1/vector_stores/{id}/files/{file_id}: its
// attributes.
func (k *KB) updateStoreFile(w http.ResponseWriter, r *http.Request, ids []string) {
	if _, ok := k.readStoreFile(w, r, ids, true); !ok {
		return
	}
	var req storeFileRequest
	if !decode(w, r, &req) {
		return
	}
	if e := checkAttributes(req.Attributes, "attributes"); e != nil {
		writeErr(w, e)
		return
	}
	sf, err := k.svc.setAttributes(r.Context(), ids[0], ids[1], req.Attributes)
	if err != nil {
		writeErr(w, storeErr(err, "file in vector store "+ids[0], ids[1], "changing the file's attributes"))
		return
	}
	writeJSON(w, http.StatusOK, storeFileObjectOf(sf))
}

// deleteStoreFile is DELETE /v1/vector_stores/{id}/files/{file_id}: the
// file leaves the store (its chunks and vectors too); the file stays.
func (k *KB) deleteStoreFile(w http.ResponseWriter, r *http.Request, ids []string) {
	if _, ok := k.readStoreFile(w, r, ids, true); !ok {
		return
	}
	if err := k.svc.removeStoreFile(r.Context(), ids[0], ids[1]); err != nil {
		writeErr(w, serverError("removing the file", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": ids[1], "object": "vector_store.file.deleted", "deleted": true})
}

// storeFileContent is GET /v1/vector_stores/{id}/files/{file_id}/content:
// the file's text as parsed, chunk by chunk.
func (k *KB) storeFileContent(w http.ResponseWriter, r *http.Request, ids []string) {
	sf, ok := k.readStoreFile(w, r, ids, false)
	if !ok {
		return
	}
	refs := make([]kbstore.ChunkRef, sf.Chunks)
	for i := range refs {
		refs[i] = kbstore.ChunkRef{Store: sf.StoreID, File: sf.FileID, Seq: i}
	}
	chunks, err := k.svc.store.Chunks(r.Context(), refs)
	if err != nil {
		writeErr(w, serverError("reading the file's chunks", err))
		return
	}
	data := make([]map[string]string, len(chunks))
	for i, c := range chunks {
		data[i] = map[string]string{"type": "text", "text": c.Text}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "vector_store.file_content.page", "data": data, "has_more": false, "next_page": nil})
}

// listStoreFiles is GET /v1/vector_stores/{id}/files (filter by state).
func (k *KB) listStoreFiles(w http.ResponseWriter, r *http.Request, ids []string) {
	if _, ok := k.readStore(w, r, ids[0], false); ok {
		k.answerFiles(w, r, ids[0], "")
	}
}

// answerFiles writes a page of a store's files, those of batch when given.
func (k *KB) answerFiles(w http.ResponseWriter, r *http.Request, store, batch string) {
	p, e := pagingOf(r)
	if e != nil {
		writeErr(w, e)
		return
	}
	filter := r.URL.Query().Get("filter")
	if filter != "" && !slices.Contains([]string{kbstore.InProgress, kbstore.Completed, kbstore.Failed, kbstore.Cancelled}, filter) {
		writeErr(w, badParam("filter", "filter %q: use in_progress, completed, failed or cancelled", filter))
		return
	}
	files, err := list[kbstore.StoreFile](r.Context(), k.svc.store, kbstore.KindStoreFile, store+"/")
	if err != nil {
		writeErr(w, serverError("listing the store's files", err))
		return
	}
	var out []storeFileObject
	for _, sf := range files {
		if (filter == "" || sf.Status == filter) && (batch == "" || sf.BatchID == batch) {
			out = append(out, storeFileObjectOf(sf))
		}
	}
	writeJSON(w, http.StatusOK, paginate(out, p, func(o storeFileObject) (int64, string) { return o.CreatedAt, o.ID }))
}
