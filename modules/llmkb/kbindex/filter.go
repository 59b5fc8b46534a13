package kbindex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Filter is one of OpenAI's attribute filters: a comparison
// {"type":"eq|ne|gt|gte|lt|lte|in|nin","key":…,"value":…} or a compound
// {"type":"and|or","filters":[…]}.
//
// A comparison on a key the file does not have, or with a value of
// another type than the attribute's (a string against a number), is
// false, and so is its negation's opposite: "ne" and "nin" are true
// then. gt, gte, lt and lte compare numbers as numbers and strings in
// byte order (ISO dates compare as dates); booleans only eq and ne.
type Filter struct {
	Type    string
	Key     string
	Value   any // string, float64, bool; a []any of them for in and nin
	Filters []*Filter
}

// MaxFilterDepth bounds the nesting of compound filters.
const MaxFilterDepth = 8

// ParseFilter reads a filter in OpenAI's JSON form. Its errors name the
// place of the fault ("filters.filters[1].type") and what is allowed.
func ParseFilter(raw json.RawMessage) (*Filter, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("filters: not valid JSON: %v", err)
	}
	return parseFilter(v, "filters", 0)
}

func parseFilter(v any, path string, depth int) (*Filter, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: must be an object with a type: a comparison (eq, ne, gt, gte, lt, lte, in, nin) or a compound (and, or)", path)
	}
	typ, _ := m["type"].(string)
	switch typ {
	case "and", "or":
		return parseCompound(m, typ, path, depth)
	case "eq", "ne", "gt", "gte", "lt", "lte", "in", "nin":
		return parseComparison(m, typ, path)
	case "":
		return nil, fmt.Errorf("%s.type: missing; it must be one of eq, ne, gt, gte, lt, lte, in, nin, and, or", path)
	}
	return nil, fmt.Errorf("%s.type: %q is not a filter type; use one of eq, ne, gt, gte, lt, lte, in, nin, and, or", path, typ)
}

func parseCompound(m map[string]any, typ, path string, depth int) (*Filter, error) {
	if depth >= MaxFilterDepth {
		return nil, fmt.Errorf("%s: compound filters nest more than %d deep; flatten them", path, MaxFilterDepth)
	}
	for k := range m {
		if k != "type" && k != "filters" {
			return nil, fmt.Errorf("%s.%s: unknown field of a compound filter; it has type and filters", path, k)
		}
	}
	list, ok := m["filters"].([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("%s.filters: a compound filter (%s) needs a non-empty array of filters", path, typ)
	}
	f := &Filter{Type: typ}
	for i, sub := range list {
		g, err := parseFilter(sub, fmt.Sprintf("%s.filters[%d]", path, i), depth+1)
		if err != nil {
			return nil, err
		}
		f.Filters = append(f.Filters, g)
	}
	return f, nil
}

func parseComparison(m map[string]any, typ, path string) (*Filter, error) {
	for k := range m {
		if k != "type" && k != "key" && k != "value" {
			return nil, fmt.Errorf("%s.%s: unknown field of a comparison filter; it has type, key and value", path, k)
		}
	}
	key, ok := m["key"].(string)
	if !ok || key == "" {
		return nil, fmt.Errorf("%s.key: a comparison filter (%s) needs the attribute's name as a non-empty string", path, typ)
	}
	v, present := m["value"]
	f := &Filter{Type: typ, Key: key, Value: v}
	switch x := v.(type) {
	case string, float64:
	case bool:
		if typ != "eq" && typ != "ne" && typ != "in" && typ != "nin" {
			return nil, fmt.Errorf("%s.value: %s compares numbers or strings, not a boolean; use eq or ne", path, typ)
		}
	case []any:
		if typ != "in" && typ != "nin" {
			return nil, fmt.Errorf("%s.value: an array is for in and nin; %s takes a string, number or boolean", path, typ)
		}
		for i, e := range x {
			switch e.(type) {
			case string, float64, bool:
			default:
				return nil, fmt.Errorf("%s.value[%d]: must be a string, number or boolean", path, i)
			}
		}
	default:
		if !present {
			return nil, fmt.Errorf("%s.value: missing; a comparison filter needs a string, number or boolean (an array for in and nin)", path)
		}
		return nil, fmt.Errorf("%s.value: must be a string, number or boolean (an array for in and nin)", path)
	}
	if (typ == "in" || typ == "nin") && f.arrayless() {
		f.Value = []any{v}
	}
	return f, nil
}

func (f *Filter) arrayless() bool {
	_, ok := f.Value.([]any)
	return !ok
}

// Match tells whether a file with these attributes passes the filter.
func (f *Filter) Match(attrs map[string]any) bool {
	if f == nil {
		return true
	}
	switch f.Type {
	case "and":
		for _, g := range f.Filters {
			if !g.Match(attrs) {
				return false
			}
		}
		return true
	case "or":
		for _, g := range f.Filters {
			if g.Match(attrs) {
				return true
			}
		}
		return false
	case "ne":
		return !compare(attrs, f.Key, "eq", f.Value)
	case "nin":
		return !compare(attrs, f.Key, "in", f.Value)
	}
	return compare(attrs, f.Key, f.Type, f.Value)
}

// compare evaluates eq, gt, gte, lt, lte and in; false for a missing
// attribute or one of another type.
func compare(attrs map[string]any, key, op string, want any) bool {
	have, ok := attrs[key]
	if !ok {
		return false
	}
	if op == "in" {
		list, _ := want.([]any)
		for _, w := range list {
			if compare(attrs, key, "eq", w) {
				return true
			}
		}
		return false
	}
	c, ok := order(numeric(have), want)
	if !ok {
		return false
	}
	switch op {
	case "eq":
		return c == 0
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	case "lte":
		return c <= 0
	}
	return false
}

// numeric turns the numbers an attribute may hold into float64.
func numeric(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case float32:
		return float64(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return x.String()
		}
		return f
	}
	return v
}

// order compares a to b when they are of one type.
func order(a, b any) (int, bool) {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return strings.Compare(x, y), ok
	case float64:
		y, ok := b.(float64)
		switch {
		case !ok:
			return 0, false
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	case bool:
		y, ok := b.(bool)
		if !ok || x != y {
			return 1, ok // booleans only eq and ne
		}
		return 0, true
	}
	return 0, false
}
