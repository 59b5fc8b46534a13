package openai

import "bytes"

// One-pass walkers for the chat chunks a stream translates: unlike
// EachMember, which skips a value before handing it over, these hand over
// where a value starts and let the caller read it (descending into it) or
// skip it, so each byte of a chunk is visited once.

// WalkObject reads the JSON object at b[i]: for each member, fn gets the
// key (raw, without quotes) and the start of the value, and returns the
// value's end (or -1). WalkObject returns the object's end, or -1.
func WalkObject(b []byte, i int, fn func(key []byte, v int) int) int {
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	i = SkipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return -1
		}
		kend := SkipString(b, i)
		if kend < 0 {
			return -1
		}
		key := b[i+1 : kend-1]
		i = SkipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		i = fn(key, SkipSpace(b, i+1))
		if i < 0 {
			return -1
		}
		if i = SkipSpace(b, i); i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return -1
	}
	return i + 1
}

// WalkArray reads the JSON array at b[i]: fn gets the start of each
// element and returns its end (or -1).
func WalkArray(b []byte, i int, fn func(v int) int) int {
	if i >= len(b) || b[i] != '[' {
		return -1
	}
	i = SkipSpace(b, i+1)
	for i < len(b) && b[i] != ']' {
		if i = fn(i); i < 0 {
			return -1
		}
		if i = SkipSpace(b, i); i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	if i >= len(b) {
		return -1
	}
	return i + 1
}

// value returns the JSON value at b[i] and its end.
func ValueAt(b []byte, i int) ([]byte, int) {
	end := SkipFast(b, i)
	if end < 0 {
		return nil, -1
	}
	return b[i:end], end
}

// SkipFast returns the end of the JSON value at b[i], or -1: SkipValue, with
// strings (most of a chunk's bytes) skipped faster.
func SkipFast(b []byte, i int) int {
	if i < len(b) && b[i] == '"' {
		return SkipString(b, i)
	}
	return SkipValue(b, i)
}

// SkipString returns the end of the JSON string at b[i], or -1. Short
// strings (keys, most values) are scanned byte by byte; past 16 bytes it
// jumps from quote to quote (IndexByte is vectorised) and counts the
// backslashes before each to know whether it is escaped.
func SkipString(b []byte, i int) int {
	j := i + 1
	for stop := min(len(b), j+16); j < stop; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	for j < len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0
		for q-n-1 > i && b[q-n-1] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return -1
}
