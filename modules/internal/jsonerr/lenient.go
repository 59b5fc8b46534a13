package jsonerr

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// Lenient rewrites a JSON document so that a number or a boolean where
// the Go value of type t holds a string becomes that string: an option
// value 50 or true (as a YAML file pasted into a form gives) is "50" or
// "true". Everything else is left as it is; a document that is not JSON
// is returned unchanged, for the decoder to describe.
func Lenient(data []byte, t reflect.Type) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return data
	}
	out, err := json.Marshal(stringify(v, t))
	if err != nil {
		return data
	}
	return out
}

// stringify turns the scalars of v that t wants as strings into strings.
func stringify(v any, t reflect.Type) any {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		switch x := v.(type) {
		case json.Number:
			return x.String()
		case bool:
			return strconv.FormatBool(x)
		}
	case reflect.Map:
		if m, ok := v.(map[string]any); ok && t.Key().Kind() == reflect.String {
			for k, e := range m {
				m[k] = stringify(e, t.Elem())
			}
		}
	case reflect.Slice, reflect.Array:
		if s, ok := v.([]any); ok {
			for i := range s {
				s[i] = stringify(s[i], t.Elem())
			}
		}
	case reflect.Struct:
		if m, ok := v.(map[string]any); ok {
			stringifyFields(m, t)
		}
	}
	return v
}

// stringifyFields applies stringify to the members of m that are fields
// of the struct type t (embedded structs' fields included).
func stringifyFields(m map[string]any, t reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
			continue
		case name == "" && f.Anonymous:
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				stringifyFields(m, ft)
			}
			continue
		case name == "":
			name = f.Name
		}
		if e, ok := m[name]; ok {
			m[name] = stringify(e, f.Type)
		}
	}
}
