package llmcache

import (
	"math"
	"strings"

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
	vec      []int8    // the question's unit vector from an embedding model, quantized
}

func newQuery(scope, model string, req *openai.Request, semantic bool, embedder func(string) []float32) (*query, error) {
	canon, err := canonBody(req.Raw) // decoded once for both keys
	if err != nil {
		return nil, err
	}
	key, err := hashCanon(scope, model, req.Endpoint, canon)
	if err != nil {
		return nil, err
	}
	q := &query{key: key, scope: scope, model: model}
	if !semantic {
		return q, nil
	}
	question, rest, ok := splitQuestion(req.Endpoint, canon)
	if !ok {
		return q, nil // no trailing user question: exact matching only
	}
	if q.bucket, err = hashCanon(scope, model, req.Endpoint+"#context", rest); err != nil {
		return nil, err
	}
	q.question = question
	q.an = analyze(question)
	if embedder != nil {
		v := embedder(question)
		if v == nil {
			q.an = nil // no vector: exact matching only
			return q, nil
		}
		q.vec = quantize(v)
	}
	return q, nil
}

// splitQuestion separates the last user turn (or a completion's prompt)
// from the rest of the request's canonical fields, which become the
// context fingerprint. canon is not changed.
func splitQuestion(endpoint string, canon map[string]any) (string, map[string]any, bool) {
	rest := make(map[string]any, len(canon))
	for k, v := range canon {
		rest[k] = v
	}
	var question string
	switch endpoint {
	case openai.Completions:
		p, ok := rest["prompt"].(string)
		if !ok {
			return "", nil, false
		}
		question = p
		delete(rest, "prompt")
	default:
		msgs, _ := rest["messages"].([]any)
		if len(msgs) == 0 {
			return "", nil, false
		}
		last, _ := msgs[len(msgs)-1].(map[string]any)
		if role, _ := last["role"].(string); role != "user" {
			return "", nil, false
		}
		question = contentText(last["content"])
		rest["messages"] = msgs[:len(msgs)-1]
	}
	if strings.TrimSpace(question) == "" {
		return "", nil, false
	}
	return question, rest, true
}

// contentText is a message's text: a string, or its text parts joined.
func contentText(c any) string {
	if s, ok := c.(string); ok {
		return s
	}
	parts, _ := c.([]any)
	var b strings.Builder
	for _, p := range parts {
		if m, ok := p.(map[string]any); ok {
			if t, ok := m["text"].(string); ok {
				b.WriteString(t)
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
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
