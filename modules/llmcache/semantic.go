package llmcache

import (
	"encoding/json"
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
	var fields map[string]json.RawMessage // the body, split once for both keys
	if err := json.Unmarshal(req.Raw, &fields); err != nil {
		return nil, err
	}
	key, err := keyOf(scope, model, req.Endpoint, fields)
	if err != nil {
		return nil, err
	}
	q := &query{key: key, scope: scope, model: model}
	if !semantic {
		return q, nil
	}
	question, rest, ok := splitQuestion(req.Endpoint, fields)
	if !ok {
		return q, nil // no trailing user question: exact matching only
	}
	if q.bucket, err = keyOf(scope, model, req.Endpoint+"#context", rest); err != nil {
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
// from the rest of the request's fields, which become the context
// fingerprint. fields is not changed.
func splitQuestion(endpoint string, fields map[string]json.RawMessage) (string, map[string]json.RawMessage, bool) {
	rest := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		rest[k] = v
	}
	var question string
	switch endpoint {
	case openai.Completions:
		if json.Unmarshal(rest["prompt"], &question) != nil {
			return "", nil, false
		}
		delete(rest, "prompt")
	default:
		var msgs []json.RawMessage
		if json.Unmarshal(rest["messages"], &msgs) != nil || len(msgs) == 0 {
			return "", nil, false
		}
		var last struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(msgs[len(msgs)-1], &last) != nil || last.Role != "user" {
			return "", nil, false
		}
		question = contentText(last.Content)
		rest["messages"], _ = json.Marshal(msgs[:len(msgs)-1])
	}
	if strings.TrimSpace(question) == "" {
		return "", nil, false
	}
	return question, rest, true
}

func contentText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(c, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteByte(' ')
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
