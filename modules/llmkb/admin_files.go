package llmkb

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
	"unicode"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/adminroute"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// upload is POST /llm/kb/stores/{id}/files: one file's bytes, kept as a
// file of the store's tenant and added to the store.
func (a kbAdmin) upload(w http.ResponseWriter, r *http.Request, vs *kbstore.VectorStore) error {
	name, data, err := a.readFile(w, r)
	if err != nil {
		return err
	}
	owner := vs.Owner
	if vs.Creator != "" {
		owner = vs.Creator
	}
	if t, ok := a.k.app.ProjectTenant(owner); ok {
		if e := a.k.checkLevels(r.Context(), t, int64(len(data))); e != nil {
			return adminErr(e.Status, "%s", e.Message)
		}
	}
	sum := sha256.Sum256(data)
	f := &kbstore.File{ID: "file-" + randID(24), Owner: owner, Filename: name, Bytes: int64(len(data)),
		Purpose: "assistants", SHA256: hex.EncodeToString(sum[:]), CreatedAt: time.Now().UTC()}
	ctx := r.Context()
	if err := a.k.svc.blobs.PutBlob(ctx, f.ID, data); err != nil {
		return adminErr(http.StatusServiceUnavailable, "keeping the file's bytes: %v; try again", err)
	}
	if err := put(ctx, a.k.svc.store, kbstore.KindFile, f.ID, f); err != nil {
		_ = a.k.svc.blobs.DeleteBlob(ctx, f.ID)
		return adminErr(http.StatusServiceUnavailable, "recording the file: %v; try again", err)
	}
	sf, err := a.k.svc.addFile(ctx, vs, f, nil, vs.Chunking, "")
	if err != nil {
		return adminErr(http.StatusServiceUnavailable, "adding the file to knowledge base %s: %v; try again", vs.ID, err)
	}
	adminroute.AddAuditFields(r, zap.String("file", f.ID), zap.String("filename", f.Filename), zap.Int64("bytes", f.Bytes))
	return answer(w, http.StatusCreated, llmapi.KBFile{ID: f.ID, Filename: f.Filename, Bytes: f.Bytes, Status: sf.Status, CreatedAt: sf.CreatedAt})
}

// readFile reads the one part named file of a multipart body: its name
// (a name alone, no path) and bytes (at most max_file_size).
func (a kbAdmin) readFile(w http.ResponseWriter, r *http.Request) (string, []byte, error) {
	limit := a.k.MaxFileSize
	r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20) // the file and its part's headers
	mr, err := r.MultipartReader()
	if err != nil {
		return "", nil, adminErr(http.StatusBadRequest, "an upload is a multipart/form-data body with one part named file: %v", err)
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return "", nil, adminErr(http.StatusBadRequest, "the upload has no part named file: send the file's bytes in a part named file, with its filename")
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return "", nil, adminErr(http.StatusRequestEntityTooLarge, "the upload is larger than llm_kb's max_file_size of %d MiB", limit>>20)
		}
		if err != nil {
			return "", nil, adminErr(http.StatusBadRequest, "reading the multipart body: %v", err)
		}
		if part.FormName() != "file" {
			_ = part.Close()
			continue
		}
		defer part.Close()
		name := part.FileName()
		if err := checkFilename(rawFilename(part)); err != nil {
			return "", nil, err
		}
		data, err := io.ReadAll(io.LimitReader(part, limit+1))
		if errors.As(err, &tooBig) || int64(len(data)) > limit {
			return "", nil, adminErr(http.StatusRequestEntityTooLarge, "%s is larger than llm_kb's max_file_size of %d MiB", name, limit>>20)
		}
		if err != nil {
			return "", nil, adminErr(http.StatusBadRequest, "reading %s: %v", name, err)
		}
		return name, data, nil
	}
}

// rawFilename is the filename a part gives, as given (Part.FileName
// keeps only its last element).
func rawFilename(part *multipart.Part) string {
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// checkFilename refuses a file name that is missing, a path, or holds a
// control character: the name tells the format and names search results,
// nothing more.
func checkFilename(name string) error {
	switch {
	case name == "":
		return adminErr(http.StatusBadRequest, "the file part has no filename: give one (it tells the format, and search results name it)")
	case len(name) > 255 || strings.ContainsAny(name, `/\`) || strings.ContainsFunc(name, unicode.IsControl) || name == "." || name == "..":
		return adminErr(http.StatusBadRequest, "filename %q: give the file's name alone (no folder, no control character, at most 255 bytes); files come only as uploaded bytes", boundedID(name))
	}
	return nil
}

// reindex is POST /llm/kb/stores/{id}/reindex: every file back to
// in_progress, queued again.
func (a kbAdmin) reindex(w http.ResponseWriter, r *http.Request, vs *kbstore.VectorStore) error {
	files, err := list[kbstore.StoreFile](r.Context(), a.k.svc.store, kbstore.KindStoreFile, vs.ID+"/")
	if err != nil {
		return adminErr(http.StatusServiceUnavailable, "listing the files of knowledge base %s: %v; try again", vs.ID, err)
	}
	n := 0
	for _, sf := range files {
		id := kbstore.StoreFileID(sf.StoreID, sf.FileID)
		err := update(r.Context(), a.k.svc.store, kbstore.KindStoreFile, id, func(cur *kbstore.StoreFile) (*kbstore.StoreFile, error) {
			if cur == nil {
				return nil, nil
			}
			cur.Status, cur.LastError, cur.Attempts, cur.Worker, cur.LeaseUntil = kbstore.InProgress, nil, 0, "", time.Time{}
			return cur, nil
		})
		if err != nil && !errors.Is(err, kbstore.ErrNotFound) {
			return adminErr(http.StatusServiceUnavailable, "reindexing %s: %v; try again (the files done so far are queued)", sf.FileID, err)
		}
		a.k.svc.queue.push(id)
		n++
	}
	adminroute.AddAuditFields(r, zap.Int("files", n))
	return answer(w, http.StatusOK, llmapi.KBReindexed{ID: vs.ID, Files: n})
}

// search is POST /llm/kb/stores/{id}/search.
func (a kbAdmin) search(w http.ResponseWriter, r *http.Request, vs *kbstore.VectorStore) error {
	var req llmapi.KBSearch
	if err := decodeStrict(w, r, &req); err != nil {
		return err
	}
	p := searchParams{queries: []string{strings.TrimSpace(req.Query)}, limit: a.k.MaxResults}
	switch n := req.MaxNumResults; {
	case p.queries[0] == "":
		return adminErr(http.StatusBadRequest, "query is required: the text to search for")
	case n < 0 || n > 50:
		return adminErr(http.StatusBadRequest, "max_num_results %d: give 1 to 50", n)
	case n > 0:
		p.limit = n
	}
	hits, err := a.k.svc.search(r.Context(), []*kbstore.VectorStore{vs}, p)
	if err != nil {
		return adminErr(http.StatusServiceUnavailable, "searching knowledge base %s: %v; try again", vs.ID, err)
	}
	out := llmapi.KBSearchResults{Query: p.queries[0], Passages: make([]llmapi.KBPassage, len(hits))}
	for i, h := range hits {
		out.Passages[i] = llmapi.KBPassage{FileID: h.ref.File, Filename: h.filename, Score: h.score, Text: h.text}
	}
	return answer(w, http.StatusOK, out)
}
