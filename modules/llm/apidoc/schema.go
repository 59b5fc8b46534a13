package apidoc

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// schemas turns Go types into OpenAPI 3.0 schemas, the way encoding/json
// writes them: a named struct becomes a component (components/schemas/
// <Name>) referred to by $ref, so that a type used by many answers is
// described once.
type schemas struct {
	components map[string]any
	names      map[named]string
	// input is set while a request body is described: a client may
	// leave out any field, so none is required, and its components are
	// named <Name>Input.
	input bool
}

// named is a struct's component: as an answer or as a request body.
type named struct {
	t     reflect.Type
	input bool
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	rawType         = reflect.TypeFor[json.RawMessage]()
	marshalerType   = reflect.TypeFor[json.Marshaler]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextMarshaler]()
)

// of returns the schema of v's type; a map[string]any is a schema
// written by hand and is returned as it is.
func (s *schemas) of(v any) map[string]any {
	if m, ok := v.(map[string]any); ok {
		return s.resolve(m).(map[string]any)
	}
	return s.typ(reflect.TypeOf(v))
}

// resolve copies a schema written by hand, replacing the Go values marked
// in it (ref) by their schemas.
func (s *schemas) resolve(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if g, ok := v[goType]; ok {
			return s.typ(reflect.TypeOf(g))
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = s.resolve(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = s.resolve(e)
		}
		return out
	}
	return v
}

func (s *schemas) typ(t reflect.Type) map[string]any {
	switch {
	case t == nil || t == rawType || t.Kind() == reflect.Interface:
		return map[string]any{"description": "any JSON value"}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t.Name() == "Duration" && strings.HasPrefix(t.PkgPath(), "github.com/caddyserver/caddy"):
		return map[string]any{"description": "a duration: a string such as 10m or 1h30m, or nanoseconds", "anyOf": []any{
			map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
	case t.Kind() != reflect.Struct && reflect.PointerTo(t).Implements(unmarshalerType):
		return map[string]any{"description": "read by its own decoder; see the manual"}
	case t.Kind() != reflect.Pointer && t.Implements(marshalerType), reflect.PointerTo(t).Implements(marshalerType) && t.Kind() == reflect.Struct:
		return map[string]any{"description": "written by its own encoder; see the manual"}
	case t.Implements(textType) || reflect.PointerTo(t).Implements(textType) && t.Kind() != reflect.Pointer:
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return nullable(s.typ(t.Elem()))
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "format": "byte"}
		}
		return map[string]any{"type": "array", "items": s.typ(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.typ(t.Elem())}
	case reflect.Struct:
		return s.component(t)
	}
	return map[string]any{"description": "any JSON value"}
}

// component describes a struct once, under its name, and refers to it;
// an anonymous struct is described in place.
func (s *schemas) component(t reflect.Type) map[string]any {
	if t.Name() == "" {
		return s.object(t)
	}
	name, ok := s.names[named{t, s.input}]
	if !ok {
		base := strings.ToUpper(t.Name()[:1]) + t.Name()[1:]
		if s.input {
			base += "Input"
		}
		name = base
		for i := 2; s.components[name] != nil; i++ {
			name = base + strconv.Itoa(i)
		}
		s.names[named{t, s.input}] = name
		s.components[name] = map[string]any{} // a type that refers to itself
		s.components[name] = s.object(t)
	}
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// object lists the fields encoding/json writes: its tag's name, embedded
// structs' fields in place; a field without omitempty is always written,
// so it is required, and null when it is a nil slice, map or pointer.
func (s *schemas) object(t reflect.Type) map[string]any {
	props, required := map[string]any{}, []string{}
	s.fields(t, props, &required)
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func (s *schemas) fields(t reflect.Type, props map[string]any, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		ft := f.Type
		if f.Anonymous && name == "" && (ft.Kind() == reflect.Struct || ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct) {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			s.fields(ft, props, required)
			continue
		}
		if name == "" {
			name = f.Name
		}
		sch := s.typ(ft)
		if strings.Contains(opts, "string") {
			sch = map[string]any{"type": "string"}
		}
		omit := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
		if !omit && !s.input {
			*required = append(*required, name)
			switch ft.Kind() {
			case reflect.Slice, reflect.Map, reflect.Interface:
				if ft != rawType {
					sch = nullable(sch)
				}
			}
		}
		props[name] = sch
	}
}

// nullable lets a schema be null too; a $ref takes no siblings in
// OpenAPI 3.0, so it is wrapped.
func nullable(sch map[string]any) map[string]any {
	if _, ok := sch["$ref"]; ok {
		return map[string]any{"nullable": true, "allOf": []any{sch}}
	}
	out := map[string]any{"nullable": true}
	for k, v := range sch {
		out[k] = v
	}
	return out
}
