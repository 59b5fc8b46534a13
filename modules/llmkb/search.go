package llmkb

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/llmkb/kbindex"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/openai"
)

// searchParams is one search over one or more stores.
type searchParams struct {
	queries    []string
	limit      int
	filter     *kbindex.Filter
	threshold  float64
	onePerFile bool
}

// passage is one result of a search.
type passage struct {
	ref      kbstore.ChunkRef
	score    float64
	filename string
	text     string
	attrs    map[string]any
}

// search finds the best passages of stores for the queries: each store's
// embedder embeds the queries (keywords alone when it has none, or when
// it fails), hits of several queries keep their best score.
func (s *service) search(ctx context.Context, stores []*kbstore.VectorStore, p searchParams) ([]passage, error) {
	for _, vs := range stores {
		s.caughtUp(ctx, vs)
	}
	best := map[kbstore.ChunkRef]float64{}
	for model, ids := range byEmbedder(stores) {
		for _, q := range p.queries {
			vec := s.queryVector(ctx, model, q)
			for _, h := range s.index().Search(kbindex.Query{Stores: ids, Text: q, Vector: vec, Limit: p.limit, Filter: p.filter,
				ScoreThreshold: p.threshold, OnePerFile: p.onePerFile}) {
				best[h.Ref] = max(best[h.Ref], h.Score)
			}
		}
	}
	hits := make([]passage, 0, len(best))
	for ref, score := range best {
		hits = append(hits, passage{ref: ref, score: score})
	}
	slices.SortFunc(hits, func(a, b passage) int {
		return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(a.ref.Store, b.ref.Store),
			strings.Compare(a.ref.File, b.ref.File), cmp.Compare(a.ref.Seq, b.ref.Seq))
	})
	hits = hits[:min(len(hits), p.limit)]
	s.touch(stores)
	return hits, s.fill(ctx, hits)
}

// byEmbedder groups store ids by their embedder ("" for keywords alone).
func byEmbedder(stores []*kbstore.VectorStore) map[string][]string {
	out := map[string][]string{}
	for _, vs := range stores {
		out[vs.Embedder] = append(out[vs.Embedder], vs.ID)
	}
	return out
}

// queryVector embeds a query with model, from the cache when it was
// asked lately; nil for keywords alone. The tokens of an embedding made
// are charged to the caller's key; a cached one costs nothing.
func (s *service) queryVector(ctx context.Context, model, q string) []float32 {
	if model == "" {
		return nil
	}
	if v, ok := s.vectors.Get(model, q); ok {
		return v
	}
	vecs, used, err := s.app().EmbeddingsUsage(ctx, model, []string{q})
	if err != nil {
		s.log().Warn("knowledge bases: embedding a query; searching by keywords alone", zap.String("embedder", model), zap.Error(err))
		return nil
	}
	if t, ok := tenancy.TenantIn(ctx); ok {
		s.charge(ctx, t.KeyID, t.Project, model, cmp.Or(used, int64(kbindex.CountTokens(q))))
	}
	s.vectors.Put(model, q, vecs[0])
	return vecs[0]
}

// fill reads the hits' texts, file names and attributes.
func (s *service) fill(ctx context.Context, hits []passage) error {
	refs := make([]kbstore.ChunkRef, len(hits))
	for i, h := range hits {
		refs[i] = h.ref
	}
	chunks, err := s.store.Chunks(ctx, refs)
	if err != nil {
		return err
	}
	text := make(map[kbstore.ChunkRef]string, len(chunks))
	for _, c := range chunks {
		text[kbstore.ChunkRef{Store: c.Store, File: c.File, Seq: c.Seq}] = c.Text
	}
	names, attrs := map[string]string{}, map[string]map[string]any{}
	for i := range hits {
		h := &hits[i]
		h.text = text[h.ref]
		if _, ok := names[h.ref.File]; !ok {
			if f, err := getFile(ctx, s.store, h.ref.File); err == nil {
				names[h.ref.File] = f.Filename
			}
		}
		id := kbstore.StoreFileID(h.ref.Store, h.ref.File)
		if _, ok := attrs[id]; !ok {
			if sf, err := getStoreFile(ctx, s.store, id); err == nil {
				attrs[id] = sf.Attributes
			}
		}
		h.filename, h.attrs = names[h.ref.File], attrs[id]
	}
	return nil
}

// touch moves the stores' last activity (and expiry) on, at most once a
// minute each, off the request.
func (s *service) touch(stores []*kbstore.VectorStore) {
	now := time.Now().UTC()
	for _, vs := range stores {
		if now.Sub(vs.LastActiveAt) < time.Minute {
			continue
		}
		id := vs.ID
		s.spawn(func() {
			_ = update(s.ctx, s.store, kbstore.KindStore, id, func(cur *kbstore.VectorStore) (*kbstore.VectorStore, error) {
				if cur != nil {
					cur.LastActiveAt = now
					cur.ExpiresAt = expiry(cur)
				}
				return cur, nil
			})
		})
	}
}

// searchRequest is the body of POST /v1/vector_stores/{id}/search.
type searchRequest struct {
	Query          json.RawMessage `json:"query"`
	MaxNumResults  *int            `json:"max_num_results"`
	Filters        json.RawMessage `json:"filters"`
	RewriteQuery   bool            `json:"rewrite_query"`
	RankingOptions *struct {
		Ranker         string   `json:"ranker"`
		ScoreThreshold *float64 `json:"score_threshold"`
	} `json:"ranking_options"`
	// OnePerFile (llmgw's) keeps the best passage of each file.
	OnePerFile bool `json:"one_per_file"`
}

// params checks a search request.
func (sr *searchRequest) params(defaultLimit int) (searchParams, *openai.Error) {
	p := searchParams{limit: defaultLimit, onePerFile: sr.OnePerFile}
	var one string
	if json.Unmarshal(sr.Query, &one) == nil {
		p.queries = []string{one}
	} else if json.Unmarshal(sr.Query, &p.queries) != nil {
		return p, badParam("query", "query is a string, or an array of strings")
	}
	p.queries = slices.DeleteFunc(p.queries, func(q string) bool { return q == "" })
	if len(p.queries) == 0 {
		return p, badParam("query", "query is required: the text to search for")
	}
	if n := sr.MaxNumResults; n != nil {
		if *n < 1 || *n > 50 {
			return p, badParam("max_num_results", "max_num_results %d: give 1 to 50", *n)
		}
		p.limit = *n
	}
	if ro := sr.RankingOptions; ro != nil && ro.ScoreThreshold != nil {
		if *ro.ScoreThreshold < 0 || *ro.ScoreThreshold > 1 {
			return p, badParam("ranking_options.score_threshold", "ranking_options.score_threshold %g: give 0 to 1", *ro.ScoreThreshold)
		}
		p.threshold = *ro.ScoreThreshold
	}
	var err error
	if len(sr.Filters) > 0 && string(sr.Filters) != "null" {
		if p.filter, err = kbindex.ParseFilter(sr.Filters); err != nil {
			return p, badParam("filters", "%v", err)
		}
	}
	return p, nil
}

// searchResult is one result of the search endpoint.
type searchResult struct {
	FileID     string         `json:"file_id"`
	Filename   string         `json:"filename"`
	Score      float64        `json:"score"`
	Attributes map[string]any `json:"attributes"`
	Content    []textContent  `json:"content"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// searchStore is POST /v1/vector_stores/{id}/search.
func (k *KB) searchStore(w http.ResponseWriter, r *http.Request, ids []string) {
	vs, ok := k.readStore(w, r, ids[0], false)
	if !ok {
		return
	}
	var sr searchRequest
	if !decode(w, r, &sr) {
		return
	}
	p, e := sr.params(k.MaxResults)
	if e == nil {
		e = checkExpired(vs)
	}
	if e != nil {
		writeErr(w, e)
		return
	}
	start := time.Now()
	hits, err := k.svc.search(r.Context(), []*kbstore.VectorStore{vs}, p)
	observeSearch(time.Since(start))
	if err != nil {
		writeErr(w, serverError("searching", err))
		return
	}
	openai.Log(r).KB = vs.ID
	data := make([]searchResult, len(hits))
	for i, h := range hits {
		data[i] = searchResult{FileID: h.ref.File, Filename: h.filename, Score: h.score, Attributes: h.attrs,
			Content: []textContent{{Type: "text", Text: h.text}}}
		if data[i].Attributes == nil {
			data[i].Attributes = map[string]any{}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "vector_store.search_results.page", "search_query": p.queries,
		"data": data, "has_more": false, "next_page": nil})
}

// checkExpired refuses to search a store past its expiry.
func checkExpired(vs *kbstore.VectorStore) *openai.Error {
	if !vs.ExpiresAt.IsZero() && time.Now().After(vs.ExpiresAt) {
		return badParam("vector_store_id", "vector store %s expired at %s (its expires_after policy); change expires_after to use it again",
			vs.ID, vs.ExpiresAt.Format(time.RFC3339))
	}
	return nil
}
