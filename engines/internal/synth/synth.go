// Package synth makes the simulated parts of answers that the sim engine
// and the stand-in providers share: JSON values that fit a JSON schema
// (tool arguments, structured output) and the awkward fragments a stream
// cuts them into. Everything is deterministic for a given random source.
package synth

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"sort"
	"strings"
	"unicode/utf8"
)

// Lexicon is the words simulated text is made of.
var Lexicon = strings.Fields(`the a model answer simulated gateway token stream quick brown fox
jumps over lazy dog river mountain cloud signal engine replica request response latency light
bright calm steady green blue seven eleven paper garden window music ocean forest stone`)

// schema is the part of a JSON schema that Value reads.
type schema struct {
	Type       json.RawMessage            `json:"type"`
	Enum       []any                      `json:"enum"`
	Const      any                        `json:"const"`
	Properties map[string]json.RawMessage `json:"properties"`
	Items      json.RawMessage            `json:"items"`
	AnyOf      []json.RawMessage          `json:"anyOf"`
	OneOf      []json.RawMessage          `json:"oneOf"`
}

// Object returns a JSON object that fits the schema's properties, as
// compact JSON text without HTML escaping (as models write it). Strings
// in it carry a quote, a backslash, a newline, "é" and "東京", so that
// whoever carries the text must get escaping and UTF-8 right. A schema
// that is not an object with properties gives {}.
func Object(raw json.RawMessage, rng *rand.Rand) string {
	v := Value(raw, rng, 0)
	if _, ok := v.(map[string]any); !ok {
		v = map[string]any{}
	}
	return Encode(v)
}

// Encode writes v as compact JSON without HTML escaping.
func Encode(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSuffix(b.String(), "\n")
}

// Value returns a value that fits the schema. Depth bounds nesting.
func Value(raw json.RawMessage, rng *rand.Rand, depth int) any {
	var s schema
	if json.Unmarshal(raw, &s) != nil {
		return Text(rng)
	}
	switch {
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[rng.IntN(len(s.Enum))]
	case len(s.AnyOf) > 0:
		return Value(s.AnyOf[0], rng, depth)
	case len(s.OneOf) > 0:
		return Value(s.OneOf[0], rng, depth)
	}
	switch typeOf(s) {
	case "integer":
		return rng.IntN(100)
	case "number":
		return float64(rng.IntN(1000)) / 10
	case "boolean":
		return rng.IntN(2) == 1
	case "null":
		return nil
	case "array":
		if depth >= 4 {
			return []any{}
		}
		return []any{Value(s.Items, rng, depth+1), Value(s.Items, rng, depth+1)}
	case "object":
		out := make(map[string]any, len(s.Properties))
		if depth >= 4 {
			return out
		}
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		sort.Strings(names) // the same draws for the same names, every time
		for _, name := range names {
			out[name] = Value(s.Properties[name], rng, depth+1)
		}
		return out
	}
	return Text(rng)
}

// typeOf reads "type": a string, or a list whose first non-null entry
// counts; with none, an object if it has properties.
func typeOf(s schema) string {
	var t string
	if json.Unmarshal(s.Type, &t) == nil && t != "" {
		return t
	}
	var ts []string
	_ = json.Unmarshal(s.Type, &ts)
	for _, t := range ts {
		if t != "null" {
			return t
		}
	}
	if s.Properties != nil {
		return "object"
	}
	return "string"
}

// Text is a string value with characters that need escaping in JSON and
// characters of two and three bytes in UTF-8.
func Text(rng *rand.Rand) string {
	w := func() string { return Lexicon[rng.IntN(len(Lexicon))] }
	return w() + ` "` + w() + `" \ é 東京` + "\n" + w()
}

// Fragments cuts text at rune boundaries into pieces of one to six runes,
// and also right after every backslash and around every multi-byte rune,
// so that a stream of them splits escapes and UTF-8 sequences of the JSON
// text wherever a fragment boundary can fall. Joined, they are text.
func Fragments(text string, rng *rand.Rand) []string {
	var out []string
	start, runes, want := 0, 0, 1+rng.IntN(6)
	for i, r := range text {
		size := utf8.RuneLen(r)
		if size < 1 {
			size = 1
		}
		cut := func(at int) {
			if at > start {
				out = append(out, text[start:at])
				start, runes, want = at, 0, 1+rng.IntN(6)
			}
		}
		if size > 1 {
			cut(i)
		}
		runes++
		if r == '\\' || size > 1 || runes >= want {
			cut(i + size)
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}
