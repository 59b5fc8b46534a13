package openai

import (
	"bytes"
	"encoding/json"
	"errors"
)

var errNotArray = errors.New("not a JSON array")

// The walkers below read JSON that json.Valid has accepted: they find the
// members and elements of objects and arrays by their bytes, without
// decoding values or copying them, so that a request is read in one pass
// and its large fields stay slices of the body.

// EachMember calls fn with each member's key (unquoted) and value (its
// bytes) of the JSON object obj, in order, and stops at fn's error.
func EachMember(obj []byte, fn func(key, val []byte) error) error {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = SkipSpace(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		kend := SkipValue(obj, i)
		if kend < 0 {
			return errNotObject
		}
		key := UnquoteKey(obj[i:kend])
		i = SkipSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return errNotObject
		}
		i = SkipSpace(obj, i+1)
		vend := SkipValue(obj, i)
		if vend < 0 {
			return errNotObject
		}
		if err := fn(key, obj[i:vend]); err != nil {
			return err
		}
		i = SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = SkipSpace(obj, i+1)
		}
	}
	return nil
}

// EachElement calls fn with the index and bytes of each element of the
// JSON array arr, and stops at fn's error.
func EachElement(arr []byte, fn func(i int, val []byte) error) error {
	i := SkipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errNotArray
	}
	i = SkipSpace(arr, i+1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		end := SkipValue(arr, i)
		if end < 0 {
			return errNotArray
		}
		if err := fn(n, arr[i:end]); err != nil {
			return err
		}
		i = SkipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = SkipSpace(arr, i+1)
		}
	}
	return nil
}

// CountElements returns the number of elements of the JSON array arr.
func CountElements(arr []byte) int {
	n := 0
	_ = EachElement(arr, func(int, []byte) error { n++; return nil })
	return n
}

// UnquoteKey returns a member's key without its quotes, decoding escapes
// only when there are some.
func UnquoteKey(q []byte) []byte {
	if len(q) < 2 {
		return nil
	}
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var s string
	if err := json.Unmarshal(q, &s); err != nil {
		return inner
	}
	return []byte(s)
}

// Kind names a JSON value's type by its first byte.
type Kind byte

const (
	KindNull Kind = iota
	KindString
	KindNumber
	KindBool
	KindObject
	KindArray
)

func KindOf(v []byte) Kind {
	if len(v) == 0 {
		return KindNull
	}
	switch v[0] {
	case '"':
		return KindString
	case '{':
		return KindObject
	case '[':
		return KindArray
	case 't', 'f':
		return KindBool
	case 'n':
		return KindNull
	}
	return KindNumber
}

// MemberOf returns the value of obj's member key, or nil.
func MemberOf(obj []byte, key string) []byte {
	var out []byte
	_ = EachMember(obj, func(k, v []byte) error {
		if string(k) == key {
			out = v
			return errFound
		}
		return nil
	})
	return out
}

// Unquote decodes a raw JSON string (the walkers' slices of valid JSON).
func Unquote(raw []byte) []byte {
	if len(raw) < 2 {
		return nil
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return []byte(s)
}

// errFound stops a walk once MemberOf has found its member.
var errFound = errors.New("found")

// StringValue returns a JSON string's value ("" for anything else).
func StringValue(v []byte) string {
	if KindOf(v) != KindString {
		return ""
	}
	return string(UnquoteKey(v))
}

// Compact returns v without line breaks (it is echoed in SSE data lines,
// where a line break would end the line).
func Compact(v []byte) []byte {
	if bytes.IndexAny(v, "\r\n") < 0 {
		return v
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		return v
	}
	return buf.Bytes()
}
