package main

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// field is one JSON field of a module's config, nested fields named by
// their path (`cluster.heartbeat`, `models[].scaling.min`).
type field struct {
	Path    string
	Type    string
	Default string
	Doc     string
}

var (
	durationType  = reflect.TypeOf(caddy.Duration(0))
	stdDuration   = reflect.TypeOf(time.Duration(0))
	timeType      = reflect.TypeOf(time.Time{})
	rawType       = reflect.TypeOf(json.RawMessage(nil))
	moduleMapType = reflect.TypeOf(caddy.ModuleMap(nil))
	// defaultRe finds a default in a doc comment: "Default: 30s",
	// "(default 64 KiB)", "defaults to 8".
	defaultRe = regexp.MustCompile("(?i)\\bdefault(?:s to| is|:)?\\s+(`[^`]+`|\"[^\"]+\"|[^.;,()\\n]+)")
)

// fields lists the JSON fields of a struct type, with the doc comments
// and defaults its source gives, descending into the module's own
// struct types.
func (x *srcIndex) fields(t reflect.Type, prefix string, seen map[reflect.Type]bool, out *[]field) error {
	p, err := x.pkg(t.PkgPath())
	if err != nil {
		return err
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, skip := jsonName(f)
		if skip {
			continue
		}
		if name == "" { // embedded, its fields inline
			if et := structOf(f.Type); et != nil && !seen[et] {
				if err := x.fields(et, prefix, seen, out); err != nil {
					return err
				}
			}
			continue
		}
		doc := ""
		if p != nil && p.fields[t.Name()] != nil {
			doc = p.fields[t.Name()][f.Name]
		}
		doc = oneLine(doc)
		*out = append(*out, field{Path: prefix + name, Type: jsonType(f.Type, f.Tag), Default: defaultOf(doc), Doc: doc})
		if err := x.nested(f.Type, prefix+name, seen, out); err != nil {
			return err
		}
	}
	return nil
}

// nested lists the fields of a field's struct type (or its elements'),
// when the type is the module's own.
func (x *srcIndex) nested(t reflect.Type, path string, seen map[reflect.Type]bool, out *[]field) error {
	for {
		switch t.Kind() {
		case reflect.Pointer:
			t = t.Elem()
			continue
		case reflect.Slice, reflect.Array:
			if t == rawType {
				return nil
			}
			t, path = t.Elem(), path+"[]"
			continue
		case reflect.Map:
			t, path = t.Elem(), path+".<name>"
			continue
		}
		break
	}
	if t.Kind() != reflect.Struct || !strings.HasPrefix(t.PkgPath(), modulePath) || seen[t] {
		return nil
	}
	seen[t] = true
	defer delete(seen, t)
	return x.fields(t, path+".", seen, out)
}

// jsonName is a field's JSON name ("" for an embedded struct whose
// fields are inlined); skip for fields JSON leaves out.
func jsonName(f reflect.StructField) (string, bool) {
	if !f.IsExported() {
		return "", true
	}
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return "", true
	}
	if name == "" && f.Anonymous && structOf(f.Type) != nil {
		return "", false
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

func structOf(t reflect.Type) reflect.Type {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		return t
	}
	return nil
}

// jsonType renders a Go type as the JSON a config holds.
func jsonType(t reflect.Type, tag reflect.StructTag) string {
	if ns := caddyNamespace(tag); ns != "" {
		switch {
		case t == moduleMapType:
			return "object of modules (`" + ns + "`)"
		case t.Kind() == reflect.Slice && t.Elem() == rawType:
			return "array of modules (`" + ns + "`)"
		case t == rawType:
			return "module (`" + ns + "`)"
		}
	}
	switch t {
	case durationType:
		return "duration (`\"30s\"`, or nanoseconds)"
	case stdDuration:
		return "integer (nanoseconds)"
	case timeType:
		return "string (RFC 3339 time)"
	case rawType:
		return "any JSON"
	}
	return kindType(t)
}

func kindType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Pointer:
		return jsonType(t.Elem(), "")
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string (base64)"
		}
		return "array of " + jsonType(t.Elem(), "")
	case reflect.Map:
		return "object of " + jsonType(t.Elem(), "")
	case reflect.Struct:
		return "object"
	}
	return "any"
}

// caddyNamespace is the module namespace a `caddy:"namespace=…"` tag
// names.
func caddyNamespace(tag reflect.StructTag) string {
	for _, part := range strings.Fields(tag.Get("caddy")) {
		if ns, ok := strings.CutPrefix(part, "namespace="); ok {
			return ns
		}
	}
	return ""
}

// defaultOf is the default a doc comment names, "" when it names none.
func defaultOf(doc string) string {
	m := defaultRe.FindStringSubmatch(doc)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

func oneLine(doc string) string {
	return strings.Join(strings.Fields(doc), " ")
}
