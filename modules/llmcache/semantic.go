package llmcache

import (
	"math"

	"github.com/llmgw/llmgw/modules/openai"
)

// query is what a request is looked up by.
type query struct {
	key      string // exact
	scope    string
	model    string
	bucket   string // context: everything but the last question
	question string
	an       *analysis // the question, analysed once
	id       setKey    // entryID(key)
	set      uint64    // setID of bucket and the analysis's words, 0 without an analysis
	vec      []int8    // the question's unit vector from an embedding model, quantized
}

func newQuery(scope, model string, req *openai.Request, semantic bool, embedder func(string) []float32) (*query, error) {
	ks := keysOf(scope, model, req.Endpoint, req.Raw, semantic)
	q := &query{key: ks.exact, id: entryID(ks.exact), scope: scope, model: model}
	if !ks.semantic {
		return q, nil // no trailing user question: exact matching only
	}
	q.bucket, q.question = ks.bucket, ks.question
	q.an = analyze(q.question)
	if embedder != nil {
		v := embedder(q.question)
		if v == nil {
			q.an = nil // no vector: exact matching only
			return q, nil
		}
		q.vec = quantize(v)
	}
	if q.an != nil {
		q.set = setID(q.bucket, q.an.sum)
	}
	return q, nil
}

// normalize scales v to unit length, so a dot product is the cosine.
func normalize(v []float32) []float32 {
	var n float64
	for _, f := range v {
		n += float64(f) * float64(f)
	}
	if n == 0 {
		return v
	}
	inv := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// quantize stores a unit vector as int8 (components times 127): a quarter
// of the memory, and a lookup reads a quarter of the cache lines per
// candidate, which is what bounds it. Cosines keep about two decimals.
func quantize(v []float32) []int8 {
	q := make([]int8, len(v))
	for i, f := range v {
		q[i] = int8(math.Round(float64(max(-1, min(1, f))) * 127))
	}
	return q
}
