package openai

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// Bounds that hold on every gateway, as OpenAI's API states them. The
// router adds the bounds an operator sets (llm_router max_n,
// max_messages) and the model's context length.
const (
	MaxN      = 128  // n
	MaxStop   = 4    // stop sequences
	MaxTools  = 128  // tools
	MaxInputs = 2048 // items of an embeddings input or a completions prompt
)

// parser is the state of one Parse: the request being filled and the
// two spellings of the answer's length, which are combined at the end.
type parser struct {
	r                         *Request
	maxTokens, maxCompletion  int64
	hasMaxTok, hasMaxComplete bool
}

// field reads one top-level member; v is its value, never JSON null
// (null means absent and is handled before).
type field struct {
	read  func(p *parser, name string, v []byte) error
	unset func(p *parser) // when the member is null
}

// fields lists the members Parse reads and checks, per endpoint. Other
// members pass through to the engine unchecked.
var fields = map[string]map[string]field{
	ChatCompletions: merge(common, sampling, map[string]field{
		"messages":              {read: (*parser).messages, unset: func(p *parser) { p.r.Messages, p.r.MessageCount = nil, 0 }},
		"max_completion_tokens": {read: (*parser).maxCompletionTokens, unset: func(p *parser) { p.hasMaxComplete = false }},
		"tools":                 {read: (*parser).tools, unset: func(p *parser) { p.r.ToolCount = 0 }},
		"tool_choice":           check(of(KindString, KindObject), "a string or an object"),
		"parallel_tool_calls":   check(of(KindBool), "a boolean"),
		"logprobs":              check(of(KindBool), "a boolean"),
		"top_logprobs":          intField(0, 20, nil),
		"response_format":       check(of(KindObject), "an object"),
	}),
	Completions: merge(common, sampling, map[string]field{
		"prompt":   {read: (*parser).prompt, unset: func(p *parser) { p.r.Prompt, p.r.InputCount = nil, 0 }},
		"echo":     check(of(KindBool), "a boolean"),
		"best_of":  intField(1, 20, nil),
		"logprobs": intField(0, 5, nil),
		"suffix":   check(of(KindString), "a string"),
	}),
	Embeddings: merge(common, map[string]field{
		"input":           {read: (*parser).input, unset: func(p *parser) { p.r.Input, p.r.InputCount = nil, 0 }},
		"dimensions":      intField(1, 0, nil),
		"encoding_format": {read: enum("float", "base64")},
	}),
}

// common are the members of every endpoint.
var common = map[string]field{
	"model":          {read: (*parser).model, unset: func(p *parser) { p.r.Model = "" }},
	"stream":         {read: (*parser).stream, unset: func(p *parser) { p.r.Stream = false }},
	"stream_options": {read: (*parser).streamOptions, unset: func(p *parser) { p.r.StreamOptions, p.r.IncludeUsage = nil, false }},
	"user": {read: func(p *parser, name string, v []byte) error {
		if KindOf(v) != KindString {
			return TypeError(name, "a string")
		}
		if p.r.CacheKey == nil {
			p.r.CacheKey = v
		}
		return nil
	}},
	"prompt_cache_key": {read: func(p *parser, name string, v []byte) error {
		if KindOf(v) != KindString {
			return TypeError(name, "a string")
		}
		p.r.CacheKey = v
		return nil
	}},
}

// sampling are the members of the generating endpoints.
var sampling = map[string]field{
	"n":                 intField(1, MaxN, func(r *Request, n int64) { r.N = n }),
	"max_tokens":        {read: (*parser).maxTokensField, unset: func(p *parser) { p.hasMaxTok = false }},
	"temperature":       floatField(0, 2, func(r *Request, f *float64) { r.Temperature = f }),
	"top_p":             floatField(0, 1, nil),
	"presence_penalty":  floatField(-2, 2, nil),
	"frequency_penalty": floatField(-2, 2, nil),
	"seed":              intField(math.MinInt64, math.MaxInt64, nil),
	"stop":              {read: (*parser).stop},
	"logit_bias":        check(of(KindObject), "an object"),
}

func merge(ms ...map[string]field) map[string]field {
	out := make(map[string]field)
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// kinds is a set of JSON types.
type kinds uint8

func (k Kind) in(set kinds) bool { return set&(1<<k) != 0 }

func of(ks ...Kind) kinds {
	var s kinds
	for _, k := range ks {
		s |= 1 << k
	}
	return s
}

// check is a field that must have one of some JSON types.
func check(set kinds, want string) field {
	return field{read: func(_ *parser, name string, v []byte) error {
		if !KindOf(v).in(set) {
			return TypeError(name, want)
		}
		return nil
	}}
}

func enum(values ...string) func(*parser, string, []byte) error {
	return func(_ *parser, name string, v []byte) error { return CheckEnum(name, v, values...) }
}

// CheckEnum checks that the member name's value v is a JSON string among
// values, else a 400 that lists them.
func CheckEnum(name string, v []byte, values ...string) error {
	for _, s := range values {
		if len(v) == len(s)+2 && string(v[1:len(v)-1]) == s {
			return nil
		}
	}
	return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: name,
		Message: fmt.Sprintf("%s must be one of %q", name, values)}
}

// intField is an integer member in [lo, hi] (hi 0: no upper bound).
func intField(lo, hi int64, set func(*Request, int64)) field {
	if hi == 0 {
		hi = math.MaxInt64
	}
	return field{read: func(p *parser, name string, v []byte) error {
		n, err := ReadInt(name, v, lo, hi)
		if err == nil && set != nil {
			set(p.r, n)
		}
		return err
	}}
}

func ReadInt(name string, v []byte, lo, hi int64) (int64, error) {
	if KindOf(v) != KindNumber || bytes.ContainsAny(v, ".eE") {
		return 0, TypeError(name, "an integer")
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, RangeError(name, intRange(lo, hi))
	}
	return n, nil
}

func intRange(lo, hi int64) string {
	switch {
	case lo == math.MinInt64 && hi == math.MaxInt64:
		return "a 64-bit integer"
	case hi == math.MaxInt64:
		return fmt.Sprintf("an integer of at least %d", lo)
	}
	return fmt.Sprintf("an integer from %d to %d", lo, hi)
}

// floatField is a number member in [lo, hi].
func floatField(lo, hi float64, set func(*Request, *float64)) field {
	return field{read: func(p *parser, name string, v []byte) error {
		if KindOf(v) != KindNumber {
			return TypeError(name, "a number")
		}
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || f < lo || f > hi {
			return RangeError(name, fmt.Sprintf("a number from %g to %g", lo, hi))
		}
		if set != nil {
			set(p.r, &f)
		}
		return nil
	}, unset: func(p *parser) {
		if set != nil {
			set(p.r, nil)
		}
	}}
}

// TypeError says that a value has the wrong JSON type; param is the
// value's path in the body, such as messages[0].content.
func TypeError(param, want string) *Error {
	return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_type", Param: param,
		Message: param + " must be " + want}
}

// RangeError says that a value is outside its bounds.
func RangeError(param, want string) *Error {
	return &Error{Status: 400, Type: "invalid_request_error", Code: "invalid_value", Param: param,
		Message: param + " must be " + want}
}
