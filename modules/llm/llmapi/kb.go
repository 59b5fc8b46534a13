package llmapi

import "time"

// The knowledge bases' admin routes (/llm/kb/…, served by llm_kb).

// KBFileCounts are a store's files by state.
type KBFileCounts struct {
	InProgress int `json:"in_progress"`
	Completed  int `json:"completed"`
	Failed     int `json:"failed"`
	Cancelled  int `json:"cancelled"`
	Total      int `json:"total"`
}

// KBStore is a knowledge base (a vector store) as operators see it.
type KBStore struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Tenant is the level of the tenancy tree that owns the store: a
	// project (org/team/project), or a team or organisation when shared.
	Tenant string `json:"tenant"`
	// Shared stores are read by every project below Tenant.
	Shared bool `json:"shared"`
	// Creator is the project whose key made a shared store; "" for one an
	// operator made.
	Creator    string       `json:"creator,omitempty"`
	Embedder   string       `json:"embedder,omitempty"`
	FileCounts KBFileCounts `json:"file_counts"`
	// Bytes are what its chunks and vectors take.
	Bytes int64 `json:"bytes"`
	// Version grows with every change to its files.
	Version   int64      `json:"version"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"` // its last file added, or its creation
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// KBFile is a file of a store with its ingestion state.
type KBFile struct {
	ID       string `json:"id"`
	Filename string `json:"filename"`
	Bytes    int64  `json:"bytes"` // as uploaded
	// Status is in_progress, completed, failed or cancelled.
	Status    string    `json:"status"`
	ErrorCode string    `json:"error_code,omitempty"`
	Error     string    `json:"error,omitempty"` // why it failed
	Chunks    int       `json:"chunks"`
	CreatedAt time.Time `json:"created_at"`
}

// KBStoreDetail is GET /llm/kb/stores/{id}: the store and its files.
type KBStoreDetail struct {
	KBStore
	Files []KBFile `json:"files"`
}

// KBCreateStore is the body of POST /llm/kb/stores.
type KBCreateStore struct {
	Tenant string `json:"tenant"`
	// Share makes the store of a team or organisation read by every
	// project below it.
	Share bool   `json:"share,omitempty"`
	Name  string `json:"name,omitempty"`
}

// KBSearch is the body of POST /llm/kb/stores/{id}/search.
type KBSearch struct {
	Query         string `json:"query"`
	MaxNumResults int    `json:"max_num_results,omitempty"`
}

// KBPassage is one passage a search found.
type KBPassage struct {
	FileID   string  `json:"file_id"`
	Filename string  `json:"filename"`
	Score    float64 `json:"score"`
	Text     string  `json:"text"`
}

// KBSearchResults is the answer of a search.
type KBSearchResults struct {
	Query    string      `json:"query"`
	Passages []KBPassage `json:"passages"`
}

// KBReindexed is the answer of POST /llm/kb/stores/{id}/reindex.
type KBReindexed struct {
	ID    string `json:"id"`
	Files int    `json:"files"` // back in progress
}

// KBDeleted is the answer of DELETE /llm/kb/stores/{id}.
type KBDeleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

var (
	kbCountsSchema = obj(map[string]any{"in_progress": typ("integer", ""), "completed": typ("integer", ""),
		"failed": typ("integer", ""), "cancelled": typ("integer", ""), "total": typ("integer", "")})
	kbStoreProps = map[string]any{
		"id":          typ("string", "vs_…"),
		"name":        typ("string", ""),
		"tenant":      typ("string", "the owning level: org/team/project, or a team or organisation when shared"),
		"shared":      typ("boolean", "read by every project below tenant"),
		"creator":     typ("string", "the project whose key made a shared store; empty for one an operator made"),
		"embedder":    typ("string", "the catalog model that embeds its chunks; empty for keywords alone"),
		"file_counts": kbCountsSchema,
		"bytes":       typ("integer", "what its chunks and vectors take"),
		"version":     typ("integer", "grows with every change to its files"),
		"created_at":  typ("string", "RFC 3339"),
		"updated_at":  typ("string", "its last file added, or its creation (RFC 3339)"),
		"expires_at":  typ("string", "RFC 3339, when it has an expiry policy"),
	}
	kbStoreSchema = obj(kbStoreProps, "id", "tenant", "file_counts")
	kbFileSchema  = obj(map[string]any{
		"id":         typ("string", "file-…"),
		"filename":   typ("string", ""),
		"bytes":      typ("integer", "as uploaded"),
		"status":     map[string]any{"type": "string", "enum": []string{"in_progress", "completed", "failed", "cancelled"}},
		"error_code": typ("string", "unsupported_file, invalid_file or server_error"),
		"error":      typ("string", "why it failed"),
		"chunks":     typ("integer", ""),
		"created_at": typ("string", "RFC 3339"),
	}, "id", "status")
	kbStoreDetailSchema = func() map[string]any {
		props := map[string]any{"files": arr(kbFileSchema)}
		for k, v := range kbStoreProps {
			props[k] = v
		}
		return obj(props, "id", "tenant", "files")
	}()
)

// KBSchemas are the schemas of the knowledge bases' admin operations.
var KBSchemas = map[string]OpSchemas{
	"GET /llm/kb/stores":      {Response: arr(kbStoreSchema)},
	"GET /llm/kb/stores/{id}": {Response: kbStoreDetailSchema},
	"POST /llm/kb/stores": {Request: func() map[string]any {
		o := obj(map[string]any{
			"tenant": typ("string", "an existing org, org/team or org/team/project"),
			"share":  typ("boolean", "a team's or organisation's store, read by every project below it (required for those)"),
			"name":   typ("string", "at most 256 characters"),
		}, "tenant")
		o["additionalProperties"] = false
		return o
	}(), Response: kbStoreSchema},
	"POST /llm/kb/stores/{id}/files": {Request: obj(map[string]any{
		"file": map[string]any{"type": "string", "format": "binary", "description": "the file's bytes, with its filename (.pdf, .docx, .html, .md, .txt …)"},
	}, "file"), Response: kbFileSchema},
	"POST /llm/kb/stores/{id}/reindex": {Response: obj(map[string]any{"id": typ("string", ""), "files": typ("integer", "files back in progress")})},
	"DELETE /llm/kb/stores/{id}":       {Response: obj(map[string]any{"id": typ("string", ""), "deleted": typ("boolean", "")})},
	"POST /llm/kb/stores/{id}/search": {Request: func() map[string]any {
		o := obj(map[string]any{"query": typ("string", "the text to search for"), "max_num_results": typ("integer", "1 to 50; default the handler's max_results")}, "query")
		o["additionalProperties"] = false
		return o
	}(), Response: obj(map[string]any{"query": typ("string", ""), "passages": arr(obj(map[string]any{
		"file_id": typ("string", ""), "filename": typ("string", ""), "score": typ("number", "0 to 1"), "text": typ("string", "")}))})},
}
