package llmkb

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// ServeHTTP answers the knowledge bases' API, and searches the knowledge
// bases a generating request names before passing it on.
func (k *KB) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if rest, ok := apiPath(r.URL.Path); ok {
		k.serveAPI(w, r, rest)
		return nil
	}
	w, tracked := openai.Track(w, r)
	if tracked != nil {
		defer k.app.RecordRequest(tracked)
	}
	return k.retrieve(w, r, next)
}

// apiPath returns the path after /v1/ of a request to the knowledge
// bases' API.
func apiPath(p string) (string, bool) {
	i := strings.Index(p, "/v1/")
	if i < 0 {
		return "", false
	}
	rest := strings.TrimSuffix(p[i+4:], "/")
	for _, root := range [...]string{"files", "vector_stores"} {
		if rest == root || strings.HasPrefix(rest, root+"/") {
			return rest, true
		}
	}
	return "", false
}

// route is one endpoint: its method, its path with {} for ids, and the
// function that answers it with the ids in order.
type route struct {
	method, pattern string
	serve           func(k *KB, w http.ResponseWriter, r *http.Request, ids []string)
}

var routes = [...]route{
	{"POST", "files", (*KB).createFile},
	{"GET", "files", (*KB).listFiles},
	{"GET", "files/{}", (*KB).getFile},
	{"DELETE", "files/{}", (*KB).deleteFile},
	{"GET", "files/{}/content", (*KB).fileContent},
	{"POST", "vector_stores", (*KB).createStore},
	{"GET", "vector_stores", (*KB).listStores},
	{"GET", "vector_stores/{}", (*KB).getStore},
	{"POST", "vector_stores/{}", (*KB).modifyStore},
	{"DELETE", "vector_stores/{}", (*KB).deleteStore},
	{"POST", "vector_stores/{}/search", (*KB).searchStore},
	{"POST", "vector_stores/{}/files", (*KB).addStoreFile},
	{"GET", "vector_stores/{}/files", (*KB).listStoreFiles},
	{"GET", "vector_stores/{}/files/{}", (*KB).getStoreFile},
	{"POST", "vector_stores/{}/files/{}", (*KB).updateStoreFile},
	{"DELETE", "vector_stores/{}/files/{}", (*KB).deleteStoreFile},
	{"GET", "vector_stores/{}/files/{}/content", (*KB).storeFileContent},
	{"POST", "vector_stores/{}/file_batches", (*KB).createBatch},
	{"GET", "vector_stores/{}/file_batches/{}", (*KB).getBatch},
	{"POST", "vector_stores/{}/file_batches/{}/cancel", (*KB).cancelBatch},
	{"GET", "vector_stores/{}/file_batches/{}/files", (*KB).listBatchFiles},
}

// serveAPI finds the endpoint of rest and answers it.
func (k *KB) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	segs := strings.Split(rest, "/")
	var allowed []string
	for _, rt := range routes {
		ids, ok := match(rt.pattern, segs)
		if !ok {
			continue
		}
		if rt.method == r.Method {
			rt.serve(k, w, r, ids)
			return
		}
		allowed = append(allowed, rt.method)
	}
	if len(allowed) == 0 {
		writeErr(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_url",
			Message: fmt.Sprintf("no endpoint %s /v1/%s; the knowledge bases serve OpenAI's Files and Vector Stores APIs", r.Method, rest)})
		return
	}
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	writeErr(w, &openai.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
		Message: fmt.Sprintf("%s /v1/%s is not served; use %s", r.Method, rest, strings.Join(allowed, " or "))})
}

// match matches a path's segments against a pattern, returning the ids
// in the {} places.
func match(pattern string, segs []string) ([]string, bool) {
	ps := strings.Split(pattern, "/")
	if len(ps) != len(segs) {
		return nil, false
	}
	var ids []string
	for i, p := range ps {
		switch {
		case p == "{}" && segs[i] != "":
			ids = append(ids, segs[i])
		case p != segs[i]:
			return nil, false
		}
	}
	return ids, true
}

// maxJSONBody bounds the JSON body of an API request.
const maxJSONBody = 4 << 20

// decode reads a JSON request body into v; an error is written as a 400
// naming what was wrong.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		writeErr(w, openai.BadRequest("invalid_request", "reading the request body: %v (a JSON body of at most %d MiB)", err, maxJSONBody>>20))
		return false
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		writeErr(w, openai.BadRequest("invalid_json", "the request body is not what this endpoint takes: %s", openai.DecodeProblem(err)))
		return false
	}
	return true
}

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeErr(w, serverError("encoding the answer", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeErr writes an API error.
func writeErr(w http.ResponseWriter, e *openai.Error) { e.Write(w) }

// notFound is the 404 of an object the caller cannot see: absent and
// another tenant's look the same.
func notFound(what, id string) *openai.Error {
	return &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
		Message: fmt.Sprintf("no %s found with id %q", what, id)}
}

// badParam is a 400 naming the parameter.
func badParam(param, format string, args ...any) *openai.Error {
	e := openai.BadRequest("invalid_value", format, args...)
	e.Param = param
	return e
}

// serverError is the store failing: a 503 the client may retry.
func serverError(doing string, err error) *openai.Error {
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "kb_store_unavailable", RetryAfter: 2 * time.Second,
		Message: fmt.Sprintf("knowledge bases: %s: %v; try again shortly", doing, err)}
}

// storeErr maps a store error to the API's: ErrNotFound to a 404 of what.
func storeErr(err error, what, id, doing string) *openai.Error {
	if errors.Is(err, kbstore.ErrNotFound) {
		return notFound(what, id)
	}
	return serverError(doing, err)
}

// page is a list page in OpenAI's shape.
type page[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// paging is a list request's limit, order and cursors.
type paging struct {
	limit         int
	desc          bool
	after, before string
}

// pagingOf reads limit (1-100, default 20), order (asc|desc, default
// desc), after and before.
func pagingOf(r *http.Request) (paging, *openai.Error) {
	q := r.URL.Query()
	p := paging{limit: 20, desc: true, after: q.Get("after"), before: q.Get("before")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			return p, badParam("limit", "limit %q: give a whole number from 1 to 100", s)
		}
		p.limit = n
	}
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		p.desc = false
	default:
		return p, badParam("order", "order %q: use asc or desc", q.Get("order"))
	}
	return p, nil
}

// paginate orders items by creation (then id), and cuts the page after
// or before the cursors.
func paginate[T any](items []T, p paging, key func(T) (int64, string)) page[T] {
	slices.SortFunc(items, func(a, b T) int {
		ta, ia := key(a)
		tb, ib := key(b)
		c := cmp.Or(cmp.Compare(ta, tb), strings.Compare(ia, ib))
		if p.desc {
			return -c
		}
		return c
	})
	start, end := 0, len(items)
	for i, it := range items {
		_, id := key(it)
		if id == p.after {
			start = i + 1
		}
		if id == p.before {
			end = i
		}
	}
	if start > end {
		start = end
	}
	items = items[start:end]
	out := page[T]{Object: "list", Data: items, HasMore: len(items) > p.limit}
	if out.HasMore {
		out.Data = items[:p.limit]
	}
	if out.Data == nil {
		out.Data = []T{}
	}
	if n := len(out.Data); n > 0 {
		_, first := key(out.Data[0])
		_, last := key(out.Data[n-1])
		out.FirstID, out.LastID = &first, &last
	}
	return out
}
