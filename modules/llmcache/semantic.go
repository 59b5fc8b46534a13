package llmcache

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/llmgw/llmgw/modules/openai"
)

// query is what a request is looked up by.
type query struct {
	key      string // exact
	scope    string
	model    string
	bucket   string // context: everything but the last question
	question string
	vec      []int8 // the question's unit vector, quantized
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
	if v := embedder(question); v != nil {
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

// embedDims is the size of the built-in embedder's vectors.
const embedDims = 256

// embed is the built-in embedder. It measures lexical similarity, not
// meaning: the content words of a question (function words dropped,
// plurals folded) and their pairs, hashed into a unit vector. Questions
// that say the same thing in other words it does not match.
func embed(text string) []float32 {
	words := contentWords(text)
	v := make([]float32, embedDims)
	add := func(feature string, w float32) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(feature))
		x := h.Sum64()
		if x>>63 == 1 {
			w = -w
		}
		v[x%embedDims] += w
	}
	for i, w := range words {
		add(w, 1)
		if i > 0 {
			add(words[i-1]+" "+w, 0.5)
		}
	}
	return normalize(v)
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

func tokens(text string) []string {
	return strings.FieldsFunc(text, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' && r != '+' && r != '-' && r != '*' && r != '/' && r != '.'
	})
}

// contentWords lower-cases, drops function words and folds plurals.
func contentWords(text string) []string {
	var out []string
	for _, t := range tokens(text) {
		t = strings.Trim(strings.ToLower(t), "'.")
		t = strings.TrimSuffix(t, "'s")
		if t == "" || stopwords[t] {
			continue
		}
		if len(t) > 3 && strings.HasSuffix(t, "s") && !strings.HasSuffix(t, "ss") {
			t = t[:len(t)-1]
		}
		out = append(out, t)
	}
	return out
}

var stopwords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the of in on at to for from by with and or is are was were be been being
	what what's whats which who whom whose how when where why do does did can could would should will shall may might
	me my i you your we our us it its this that these those there here please tell give show let know
	explain describe name say about some any just kindly quickly briefly exactly actually really`) {
		m[w] = true
	}
	return m
}()

// sameFacts guards semantic hits: two questions must carry the same
// numbers and the same capitalised names (not at a sentence start), so
// "capital of France" never answers "capital of Germany" and "2 + 2"
// never answers "2 + 3", however close their vectors.
func sameFacts(a, b string) bool {
	return slices.Equal(facts(a, isNumber), facts(b, isNumber)) && namesIn(a, b) && namesIn(b, a)
}

// namesIn reports whether every capitalised name of a appears in b, in
// any case ("France" is in "what's the capital of france").
func namesIn(a, b string) bool {
	words := map[string]bool{}
	for _, w := range contentWords(b) {
		words[w] = true
	}
	for _, t := range tokens(b) {
		words[strings.ToLower(strings.TrimSuffix(t, "'s"))] = true
	}
	for _, n := range facts(a, nil) {
		if !words[n] {
			return false
		}
	}
	return true
}

func isNumber(t string) bool {
	for _, r := range t {
		if unicode.IsDigit(r) {
			return true
		}
	}
	return false
}

// facts returns the sorted numbers (keep = isNumber) or the sorted
// lower-cased names (keep = nil: capitalised words, any sentence's first
// word excepted) of a text.
func facts(text string, keep func(string) bool) []string {
	var out []string
	start := true
	for _, t := range strings.Fields(text) {
		word := strings.TrimFunc(t, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		word = strings.TrimSuffix(word, "'s")
		switch {
		case word == "":
		case keep != nil:
			if keep(word) {
				out = append(out, word)
			}
		case !start && unicode.IsUpper([]rune(word)[0]) && !stopwords[strings.ToLower(word)]:
			out = append(out, strings.ToLower(word))
		}
		start = strings.ContainsAny(t[len(t)-1:], ".?!")
	}
	slices.Sort(out)
	return out
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
