package llmkb

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// fileObject is OpenAI's File object.
type fileObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

func fileObjectOf(f *kbstore.File) fileObject {
	o := fileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename,
		Purpose: f.Purpose, Status: "processed"}
	if !f.ExpiresAt.IsZero() {
		t := f.ExpiresAt.Unix()
		o.ExpiresAt = &t
	}
	return o
}

// purposes the knowledge bases keep files for.
var purposes = map[string]bool{"assistants": true, "user_data": true}

// upload is what a multipart upload carried.
type upload struct {
	filename, purpose string
	data              []byte
	expiresIn         time.Duration
}

// createFile is POST /v1/files: a multipart upload of one file.
func (k *KB) createFile(w http.ResponseWriter, r *http.Request, _ []string) {
	up, e := k.readUpload(w, r)
	if e != nil {
		writeErr(w, e)
		return
	}
	if e := k.checkQuota(r, int64(len(up.data))); e != nil {
		writeErr(w, e)
		return
	}
	c := callerOf(r)
	sum := sha256.Sum256(up.data)
	now := time.Now().UTC()
	f := &kbstore.File{ID: "file-" + randID(24), Owner: c.project, Key: c.keyID, Filename: up.filename, Bytes: int64(len(up.data)),
		Purpose: up.purpose, SHA256: hex.EncodeToString(sum[:]), CreatedAt: now}
	if up.expiresIn > 0 {
		f.ExpiresAt = now.Add(up.expiresIn)
	}
	if err := k.svc.blobs.PutBlob(r.Context(), f.ID, up.data); err != nil {
		writeErr(w, serverError("keeping the file's bytes", err))
		return
	}
	if err := put(r.Context(), k.svc.store, kbstore.KindFile, f.ID, f); err != nil {
		_ = k.svc.blobs.DeleteBlob(r.Context(), f.ID)
		writeErr(w, serverError("recording the file", err))
		return
	}
	writeJSON(w, http.StatusOK, fileObjectOf(f))
}

// readUpload reads the parts of a multipart upload: file, purpose and
// expires_after[anchor|seconds].
func (k *KB) readUpload(w http.ResponseWriter, r *http.Request) (*upload, *openai.Error) {
	r.Body = http.MaxBytesReader(w, r.Body, k.MaxFileSize+1<<20) // the file, its form fields and headers
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, openai.BadRequest("invalid_request", "an upload is a multipart/form-data body with the parts file and purpose: %v", err)
	}
	up := new(upload)
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, tooLarge(k.MaxFileSize)
		}
		if err != nil {
			return nil, openai.BadRequest("invalid_request", "reading the multipart body: %v", err)
		}
		if e := k.readPart(part, up); e != nil {
			return nil, e
		}
	}
	switch {
	case up.data == nil:
		return nil, badParam("file", "the upload has no part named file: send the file's bytes in a part named file, with its filename")
	case up.purpose == "":
		return nil, badParam("purpose", "the upload has no purpose: give purpose assistants (or user_data) for files of knowledge bases")
	case !purposes[up.purpose]:
		return nil, badParam("purpose", "purpose %q is not kept by this gateway: knowledge bases take assistants or user_data", up.purpose)
	}
	return up, nil
}

// readPart reads one part of an upload into up.
func (k *KB) readPart(part *multipart.Part, up *upload) *openai.Error {
	defer part.Close()
	switch part.FormName() {
	case "file":
		up.filename = part.FileName()
		if up.filename == "" {
			return badParam("file", "the file part has no filename: give one (it tells the format, and search results name it)")
		}
		data, err := io.ReadAll(io.LimitReader(part, k.MaxFileSize+1))
		var tooBig *http.MaxBytesError
		if int64(len(data)) > k.MaxFileSize || errors.As(err, &tooBig) {
			return tooLarge(k.MaxFileSize)
		}
		if err != nil {
			return openai.BadRequest("invalid_request", "reading the file: %v", err)
		}
		up.data = data
	case "purpose":
		up.purpose = formValue(part)
	case "expires_after[seconds]":
		s := formValue(part)
		n, err := strconv.Atoi(s)
		if err != nil || n < 3600 || n > 30*24*3600 {
			return badParam("expires_after.seconds", "expires_after[seconds] %q: give 3600 (an hour) to 2592000 (30 days)", s)
		}
		up.expiresIn = time.Duration(n) * time.Second
	case "expires_after[anchor]":
		if a := formValue(part); a != "created_at" {
			return badParam("expires_after.anchor", "expires_after[anchor] %q: the anchor is created_at", a)
		}
	}
	return nil
}

// tooLarge is the 413 of an upload over max_file_size.
func tooLarge(limit int64) *openai.Error {
	return &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "file_too_large", Param: "file",
		Message: fmt.Sprintf("the file is larger than this gateway's limit of %s (llm_kb max_file_size)", humanize.IBytes(uint64(limit)))}
}

// formValue is a small form part's value.
func formValue(part *multipart.Part) string {
	b, _ := io.ReadAll(io.LimitReader(part, 1024))
	return string(b)
}

// ownFile reads a file the caller owns, or writes the 404.
func (k *KB) ownFile(w http.ResponseWriter, r *http.Request, id string) (*kbstore.File, bool) {
	f, err := getFile(r.Context(), k.svc.store, id)
	if err == nil && !callerOf(r).ownsFile(f) {
		err = kbstore.ErrNotFound
	}
	if err != nil {
		writeErr(w, storeErr(err, "file", id, "reading the file"))
		return nil, false
	}
	return f, true
}

// listFiles is GET /v1/files: the caller's files, by purpose.
func (k *KB) listFiles(w http.ResponseWriter, r *http.Request, _ []string) {
	p, e := pagingOf(r)
	if e != nil {
		writeErr(w, e)
		return
	}
	files, err := list[kbstore.File](r.Context(), k.svc.store, kbstore.KindFile, "")
	if err != nil {
		writeErr(w, serverError("listing files", err))
		return
	}
	c, purpose := callerOf(r), r.URL.Query().Get("purpose")
	var out []fileObject
	for _, f := range files {
		if c.ownsFile(f) && (purpose == "" || f.Purpose == purpose) {
			out = append(out, fileObjectOf(f))
		}
	}
	writeJSON(w, http.StatusOK, paginate(out, p, func(o fileObject) (int64, string) { return o.CreatedAt, o.ID }))
}

// getFile is GET /v1/files/{id}.
func (k *KB) getFile(w http.ResponseWriter, r *http.Request, ids []string) {
	if f, ok := k.ownFile(w, r, ids[0]); ok {
		writeJSON(w, http.StatusOK, fileObjectOf(f))
	}
}

// fileContent is GET /v1/files/{id}/content: the bytes as uploaded.
func (k *KB) fileContent(w http.ResponseWriter, r *http.Request, ids []string) {
	f, ok := k.ownFile(w, r, ids[0])
	if !ok {
		return
	}
	data, err := k.svc.blobs.GetBlob(r.Context(), f.ID)
	if err != nil {
		writeErr(w, storeErr(err, "file content", f.ID, "reading the file's bytes"))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", f.Filename))
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}

// deleteFile is DELETE /v1/files/{id}: the file leaves every store it is
// in (its chunks and vectors with it), then its bytes go.
func (k *KB) deleteFile(w http.ResponseWriter, r *http.Request, ids []string) {
	f, ok := k.ownFile(w, r, ids[0])
	if !ok {
		return
	}
	if err := k.svc.removeFile(r.Context(), f.ID); err != nil {
		writeErr(w, serverError("deleting the file", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": f.ID, "object": "file", "deleted": true})
}
