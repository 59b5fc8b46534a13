package llmkb

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/adminroute"
	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// The operators' routes of the knowledge bases, served by the llm app
// under /llm/kb/ (admin endpoint and llm_admin sites) with its roles and
// audit: every store of every tenant, made, filled, reindexed, searched
// and deleted as its tenant. Files come only as uploaded bytes. Each has
// its audit action ("" for a read).
var adminRoutes = []struct {
	op    llm.AdminOperation
	audit string
}{
	{llm.AdminOperation{Method: "GET", Path: "/llm/kb/stores", Summary: "Every knowledge base (vector store) with its tenant, shared or not, files by state, bytes, version and last change, newest first; ?tenant=org[/team[/project]] keeps those owned by that level or below it (400 for a level the tenancy tree does not have)"}, ""},
	{llm.AdminOperation{Method: "POST", Path: "/llm/kb/stores", Summary: "Create a knowledge base for a tenant: a project's, or with share a team's or organisation's that every project below it reads (keys of that level read it; only operators change it); 400 for a tenant the tree does not have, a team or organisation without share, or a field it does not take; 201 with the store", Body: `{"tenant":"acme/research","share":true,"name":"handbook"}`}, "kb store created"},
	{llm.AdminOperation{Method: "GET", Path: "/llm/kb/stores/{id}", Summary: "One knowledge base with its files: each one's state (in_progress, completed, failed, cancelled), and why it failed"}, ""},
	{llm.AdminOperation{Method: "DELETE", Path: "/llm/kb/stores/{id}", Summary: "Delete a knowledge base: its files leave it, its chunks and vectors go"}, "kb store deleted"},
	{llm.AdminOperation{Method: "POST", Path: "/llm/kb/stores/{id}/files", Summary: "Upload one file into a knowledge base, as its tenant: a multipart/form-data body with a part named file carrying the file's name and bytes (at most llm_kb's max_file_size: 413 above); it is read, chunked and embedded in the background, GET /llm/kb/stores/{id} shows its state; 201 with the file", Body: `{"file":"(the file's bytes, with its filename)"}`, BodyType: "multipart/form-data"}, "kb file uploaded"},
	{llm.AdminOperation{Method: "POST", Path: "/llm/kb/stores/{id}/reindex", Summary: "Read, chunk and embed every file of a knowledge base again (after a change of embedder or reader): each goes back to in_progress; searches find the old passages until a file's new ones are in"}, "kb store reindexed"},
	{llm.AdminOperation{Method: "POST", Path: "/llm/kb/stores/{id}/search", Summary: "Search a knowledge base as a request of its tenant would: the passages with their files and scores", Body: `{"query":"how do I reset my password","max_num_results":5}`}, ""},
}

// init describes the routes for the OpenAPI document and declares them.
func init() {
	for _, rt := range adminRoutes {
		llm.DescribeAdminOperations(rt.op)
		adminroute.Declare("kb", adminroute.Op{Method: rt.op.Method, Path: rt.op.Path, Audit: rt.audit})
	}
}

// kbAdmin answers the routes for the latest llm_kb handler.
type kbAdmin struct{ k *KB }

// ServeHTTP answers one declared route (the app matched it).
func (a kbAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	if r.Pattern == "GET /llm/kb/stores" {
		return a.list(w, r)
	}
	if r.Pattern == "POST /llm/kb/stores" {
		return a.create(w, r)
	}
	vs, err := a.store(r)
	if err != nil {
		return err
	}
	switch r.Pattern {
	case "GET /llm/kb/stores/{id}":
		return a.get(w, r, vs)
	case "DELETE /llm/kb/stores/{id}":
		if err := a.k.svc.removeStore(r.Context(), vs.ID); err != nil {
			return adminErr(http.StatusServiceUnavailable, "deleting knowledge base %s: %v; try again", vs.ID, err)
		}
		return answer(w, http.StatusOK, llmapi.KBDeleted{ID: vs.ID, Deleted: true})
	case "POST /llm/kb/stores/{id}/files":
		return a.upload(w, r, vs)
	case "POST /llm/kb/stores/{id}/reindex":
		return a.reindex(w, r, vs)
	case "POST /llm/kb/stores/{id}/search":
		return a.search(w, r, vs)
	}
	return adminErr(http.StatusNotFound, "no route %s %s", r.Method, r.URL.Path)
}

// adminErr is an admin API error: {"error": "…"} with status.
func adminErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

func answer(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// validStoreID reports whether id is a store id: vs_ and letters or
// digits, as the handler makes them.
func validStoreID(id string) bool {
	rest, ok := strings.CutPrefix(id, "vs_")
	return ok && len(rest) > 0 && len(rest) <= 64 && !strings.ContainsFunc(rest, func(c rune) bool { return !strings.ContainsRune(idChars, c) })
}

// store reads the store of the path.
func (a kbAdmin) store(r *http.Request) (*kbstore.VectorStore, error) {
	id := r.PathValue("id")
	if !validStoreID(id) {
		return nil, adminErr(http.StatusBadRequest, "%q is no knowledge base id: an id is vs_ and letters or digits (GET /llm/kb/stores lists them)", boundedID(id))
	}
	vs, err := getVectorStore(r.Context(), a.k.svc.store, id)
	switch {
	case errors.Is(err, kbstore.ErrNotFound):
		return nil, adminErr(http.StatusNotFound, "no knowledge base %s (GET /llm/kb/stores lists them)", id)
	case err != nil:
		return nil, adminErr(http.StatusServiceUnavailable, "reading knowledge base %s: %v; try again", id, err)
	}
	return vs, nil
}

// boundedID cuts a rejected id for an error message.
func boundedID(id string) string {
	if len(id) > 80 {
		return id[:80] + "…"
	}
	return id
}

// list is GET /llm/kb/stores.
func (a kbAdmin) list(w http.ResponseWriter, r *http.Request) error {
	tenant := r.URL.Query().Get("tenant")
	if tenant != "" {
		if err := a.checkTenant(tenant, "tenant"); err != nil {
			return err
		}
	}
	stores, err := list[kbstore.VectorStore](r.Context(), a.k.svc.store, kbstore.KindStore, "")
	if err != nil {
		return adminErr(http.StatusServiceUnavailable, "listing knowledge bases: %v; try again", err)
	}
	out := []llmapi.KBStore{}
	for _, vs := range stores {
		if tenant != "" && vs.Owner != tenant && !strings.HasPrefix(vs.Owner, tenant+"/") {
			continue
		}
		s, _, err := a.summary(r.Context(), vs)
		if err != nil {
			return err
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(x, y llmapi.KBStore) int { return y.CreatedAt.Compare(x.CreatedAt) })
	return answer(w, http.StatusOK, out)
}

// summary describes a store, and returns its files.
func (a kbAdmin) summary(ctx context.Context, vs *kbstore.VectorStore) (llmapi.KBStore, []*kbstore.StoreFile, error) {
	s := llmapi.KBStore{ID: vs.ID, Name: vs.Name, Tenant: vs.Owner, Shared: vs.Shared, Creator: vs.Creator, Embedder: vs.Embedder,
		Version: vs.Version, CreatedAt: vs.CreatedAt, UpdatedAt: vs.CreatedAt}
	if !vs.ExpiresAt.IsZero() {
		t := vs.ExpiresAt
		s.ExpiresAt = &t
	}
	files, err := list[kbstore.StoreFile](ctx, a.k.svc.store, kbstore.KindStoreFile, vs.ID+"/")
	if err != nil {
		return s, nil, adminErr(http.StatusServiceUnavailable, "reading the files of knowledge base %s: %v; try again", vs.ID, err)
	}
	var fc fileCounts
	for _, sf := range files {
		fc.add(sf.Status)
		s.Bytes += sf.UsageBytes
		if sf.CreatedAt.After(s.UpdatedAt) {
			s.UpdatedAt = sf.CreatedAt
		}
	}
	s.FileCounts = llmapi.KBFileCounts(fc)
	return s, files, nil
}

// get is GET /llm/kb/stores/{id}.
func (a kbAdmin) get(w http.ResponseWriter, r *http.Request, vs *kbstore.VectorStore) error {
	s, files, err := a.summary(r.Context(), vs)
	if err != nil {
		return err
	}
	out := llmapi.KBStoreDetail{KBStore: s, Files: make([]llmapi.KBFile, 0, len(files))}
	for _, sf := range files {
		f := llmapi.KBFile{ID: sf.FileID, Status: sf.Status, Chunks: sf.Chunks, CreatedAt: sf.CreatedAt}
		if file, err := getFile(r.Context(), a.k.svc.store, sf.FileID); err == nil {
			f.Filename, f.Bytes = file.Filename, file.Bytes
		}
		if sf.LastError != nil {
			f.ErrorCode, f.Error = sf.LastError.Code, sf.LastError.Message
		}
		out.Files = append(out.Files, f)
	}
	slices.SortFunc(out.Files, func(x, y llmapi.KBFile) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return answer(w, http.StatusOK, out)
}

// maxAdminJSON bounds the JSON body of an admin route.
const maxAdminJSON = 64 << 10

// decodeStrict reads a JSON body of at most maxAdminJSON bytes that has
// only the fields of v.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) error {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxAdminJSON)); err != nil {
		return adminErr(http.StatusBadRequest, "reading the body: %v; it is JSON of at most %d KiB", err, maxAdminJSON>>10)
	}
	dec := json.NewDecoder(&buf)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return adminErr(http.StatusBadRequest, "the body is not what this route takes: %v (see GET /llm/openapi.json)", err)
	}
	return nil
}

// checkTenant refuses a tenant path the tenancy tree does not have.
func (a kbAdmin) checkTenant(path, param string) error {
	parts := strings.Split(path, "/")
	if len(parts) > 3 || slices.Contains(parts, "") {
		return adminErr(http.StatusBadRequest, "%s %q: give org, org/team or org/team/project", param, boundedID(path))
	}
	if !tenantExists(a.k.app.Tenancy(), parts) {
		return adminErr(http.StatusBadRequest, "%s %q is not in the tenancy tree; GET /llm/tenants lists its levels (create one with POST /llm/tenants/orgs…)", param, boundedID(path))
	}
	return nil
}

// tenantExists reports whether the tree has the level of parts.
func tenantExists(orgs []*tenancy.Org, parts []string) bool {
	for _, o := range orgs {
		if o.Name != parts[0] {
			continue
		}
		if len(parts) == 1 {
			return true
		}
		for _, t := range o.Teams {
			if t.Name != parts[1] {
				continue
			}
			if len(parts) == 2 {
				return true
			}
			for _, p := range t.Projects {
				if p.Name == parts[2] {
					return true
				}
			}
		}
	}
	return false
}

// create is POST /llm/kb/stores.
func (a kbAdmin) create(w http.ResponseWriter, r *http.Request) error {
	var req llmapi.KBCreateStore
	if err := decodeStrict(w, r, &req); err != nil {
		return err
	}
	if err := a.checkTenant(req.Tenant, "tenant"); err != nil {
		return err
	}
	project := strings.Count(req.Tenant, "/") == 2
	switch {
	case project && req.Share:
		return adminErr(http.StatusBadRequest, "tenant %q is a project: it has no levels below to share with; leave share out, or give its team or organisation", req.Tenant)
	case !project && !req.Share:
		return adminErr(http.StatusBadRequest, "tenant %q is a team or organisation: its projects read its store only when shared; add \"share\": true, or give a project", req.Tenant)
	case utf8.RuneCountInString(req.Name) > 256 || strings.ContainsFunc(req.Name, unicode.IsControl):
		return adminErr(http.StatusBadRequest, "name: at most 256 characters, none a control character")
	}
	now := time.Now().UTC()
	vs := &kbstore.VectorStore{ID: "vs_" + randID(24), Owner: req.Tenant, Shared: req.Share, Name: req.Name,
		Embedder: a.k.Embedder, Chunking: kbstore.Chunking{Type: "auto", MaxTokens: 800, OverlapTokens: 400}, CreatedAt: now, LastActiveAt: now}
	if err := put(r.Context(), a.k.svc.store, kbstore.KindStore, vs.ID, vs); err != nil {
		return adminErr(http.StatusServiceUnavailable, "recording the knowledge base: %v; try again", err)
	}
	adminroute.AddAuditFields(r, zap.String("id", vs.ID), zap.String("tenant", vs.Owner), zap.Bool("shared", vs.Shared))
	s, _, err := a.summary(r.Context(), vs)
	if err != nil {
		return err
	}
	return answer(w, http.StatusCreated, s)
}
