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

// eachMember calls fn with each member's key (unquoted) and value (its
// bytes) of the JSON object obj, in order, and stops at fn's error.
func eachMember(obj []byte, fn func(key, val []byte) error) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipSpace(obj, i+1)
	for i < len(obj) && obj[i] != '}' {
		kend := skipValue(obj, i)
		if kend < 0 {
			return errNotObject
		}
		key := unquoteKey(obj[i:kend])
		i = skipSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return errNotObject
		}
		i = skipSpace(obj, i+1)
		vend := skipValue(obj, i)
		if vend < 0 {
			return errNotObject
		}
		if err := fn(key, obj[i:vend]); err != nil {
			return err
		}
		i = skipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return nil
}

// eachElement calls fn with the index and bytes of each element of the
// JSON array arr, and stops at fn's error.
func eachElement(arr []byte, fn func(i int, val []byte) error) error {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errNotArray
	}
	i = skipSpace(arr, i+1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		end := skipValue(arr, i)
		if end < 0 {
			return errNotArray
		}
		if err := fn(n, arr[i:end]); err != nil {
			return err
		}
		i = skipSpace(arr, end)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return nil
}

// countElements returns the number of elements of the JSON array arr.
func countElements(arr []byte) int {
	n := 0
	_ = eachElement(arr, func(int, []byte) error { n++; return nil })
	return n
}

// unquoteKey returns a member's key without its quotes, decoding escapes
// only when there are some.
func unquoteKey(q []byte) []byte {
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

// kind names a JSON value's type by its first byte.
type kind byte

const (
	kNull kind = iota
	kString
	kNumber
	kBool
	kObject
	kArray
)

func kindOf(v []byte) kind {
	if len(v) == 0 {
		return kNull
	}
	switch v[0] {
	case '"':
		return kString
	case '{':
		return kObject
	case '[':
		return kArray
	case 't', 'f':
		return kBool
	case 'n':
		return kNull
	}
	return kNumber
}
