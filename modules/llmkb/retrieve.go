package llmkb

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// KnowledgeHeader names, on a generating request, the vector stores to
// answer from (comma-separated ids): llmgw's way for chat clients, which
// have no file_search tool.
const KnowledgeHeader = "X-Llmgw-Knowledge"

// maxStores is the stores one request may search (OpenAI's limit on a
// file_search tool's vector_store_ids is 2; llmgw allows more).
const maxStores = 10

// asked is what a generating request asks the knowledge bases for.
type asked struct {
	ids       []string
	limit     int
	filters   json.RawMessage
	threshold float64
	param     string // where the ids came from, for errors
}

// askedOf reads the request's file_search tool, else the knowledge
// header, else the stores the configuration gives the caller's project;
// nil when it asks for none.
func (k *KB) askedOf(r *http.Request, req *openai.Request) *asked {
	if fs := req.FileSearch; fs != nil {
		return &asked{ids: fs.VectorStoreIDs, limit: fs.MaxNumResults, filters: fs.Filters, threshold: fs.ScoreThreshold, param: "tools.file_search.vector_store_ids"}
	}
	if h := r.Header.Get(KnowledgeHeader); h != "" {
		return &asked{ids: storeIDs(h), param: "header " + KnowledgeHeader}
	}
	if ids := k.defaultStores(callerOf(r)); len(ids) > 0 {
		return &asked{ids: ids, param: "llm_kb stores_for"}
	}
	return nil
}

// retrieve searches the knowledge bases a generating request asks for
// and gives the passages to the model in a system message; the answer
// cites them (see the citation writer and the Responses translation).
func (k *KB) retrieve(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	w, req, err := openai.Enter(w, r)
	if err != nil || req.Endpoint != openai.ChatCompletions || req.CountOnly {
		return next.ServeHTTP(w, r)
	}
	a := k.askedOf(r, req)
	if a == nil {
		return next.ServeHTTP(w, r)
	}
	p, stores, e := k.prepare(r, a)
	if e != nil {
		e.WriteFor(w, r)
		return nil
	}
	var msgs []json.RawMessage // split once: read for the question, then added to
	if err := json.Unmarshal(req.Messages, &msgs); err != nil {
		return next.ServeHTTP(w, r) // the router answers a malformed request
	}
	if q := lastUserText(msgs); q != "" {
		p.queries = []string{q}
	}
	if len(p.queries) == 0 {
		return next.ServeHTTP(w, r) // nothing to search for
	}
	start := time.Now()
	hits, err := k.svc.search(r.Context(), stores, p)
	observeSearch(time.Since(start))
	if err != nil {
		serverError("searching the knowledge bases", err).WriteFor(w, r)
		return nil
	}
	names := make([]string, len(stores))
	for i, vs := range stores {
		names[i] = fmt.Sprintf("%s@%d", vs.ID, vs.Version)
	}
	openai.Log(r).KB = strings.Join(a.ids, ",")
	req.Retrieval = retrievalOf(hits, p.queries)
	req.CacheScope = "kb:" + strings.Join(names, ",")
	if err := inject(req, msgs, hits, names); err != nil {
		openai.BadRequest("invalid_request", "adding the passages found to the messages: %v", err).WriteFor(w, r)
		return nil
	}
	req.Watched = true
	w.Header().Set("X-Llmgw-Kb-Results", fmt.Sprint(len(hits)))
	if req.API != openai.APIChat {
		return next.ServeHTTP(w, r) // the translation writes the citations in its API
	}
	cw := newCitationWriter(w, req.Retrieval)
	err = next.ServeHTTP(cw, r)
	cw.finish()
	return err
}

// prepare checks the stores asked for (each one the caller sees, not
// expired) and the search's parameters.
func (k *KB) prepare(r *http.Request, a *asked) (searchParams, []*kbstore.VectorStore, *openai.Error) {
	p := searchParams{limit: k.MaxResults, threshold: a.threshold, queries: []string{}}
	if a.limit > 0 {
		p.limit = a.limit
	}
	if len(a.ids) == 0 || len(a.ids) > maxStores {
		return p, nil, badParam(a.param, "%s: give 1 to %d vector store ids", a.param, maxStores)
	}
	if len(a.filters) > 0 && string(a.filters) != "null" {
		f, err := kbindex.ParseFilter(a.filters)
		if err != nil {
			return p, nil, badParam("tools.file_search.filters", "%v", err)
		}
		p.filter = f
	}
	c := callerOf(r)
	stores := make([]*kbstore.VectorStore, 0, len(a.ids))
	for _, id := range a.ids {
		vs, err := getVectorStore(r.Context(), k.svc.store, id)
		if err == nil && !c.sees(vs) {
			err = kbstore.ErrNotFound
		}
		if err != nil {
			e := storeErr(err, "vector store", id, "reading the vector store")
			e.Param = a.param
			return p, nil, e
		}
		if e := checkExpired(vs); e != nil {
			return p, nil, e
		}
		stores = append(stores, vs)
	}
	return p, stores, nil
}

// retrievalOf is what the search found, as the request carries it.
func retrievalOf(hits []passage, queries []string) *openai.Retrieval {
	rt := &openai.Retrieval{CallID: "fs_" + randID(24), Queries: queries, Status: "completed", Results: make([]openai.RetrievalResult, len(hits))}
	for i, h := range hits {
		rt.Results[i] = openai.RetrievalResult{FileID: h.ref.File, Filename: h.filename, Score: h.score, Text: h.text, Attributes: h.attrs}
	}
	return rt
}
