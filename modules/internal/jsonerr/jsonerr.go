// Package jsonerr says what is wrong with a JSON body in an API's terms:
// which field, what it holds and what it should hold, never the Go types
// behind it ("Go struct field …").
package jsonerr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Describe returns the message of a JSON decoding error.
func Describe(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &te):
		if te.Field == "" {
			return fmt.Sprintf("the body is a JSON %s; send %s", te.Value, Kind(te.Type))
		}
		return fmt.Sprintf("field %q is a JSON %s; it must be %s", te.Field, te.Value, Kind(te.Type))
	case errors.As(err, &se):
		return fmt.Sprintf("the body is not valid JSON: %s (at byte %d)", strings.TrimPrefix(se.Error(), "json: "), se.Offset)
	case errors.Is(err, io.EOF):
		return "the body is empty; send a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends before its JSON does"
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	if strings.HasPrefix(msg, "unknown field ") {
		return msg + "; remove it (see the route's schema in GET /llm/openapi.json)"
	}
	return msg
}

// Kind names the JSON type a Go type is decoded from, in JSON's words.
func Kind(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return Kind(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}
