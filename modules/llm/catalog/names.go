package catalog

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// NameRule is the rule every model name and alias follows, in the config
// (Caddyfile and JSON), in storage and on the admin API.
const NameRule = "1 to 128 characters: letters, digits, '.', '_', ':', '-', and '/' between parts (as in org/name); no part may be '.' or '..'"

// maxNameLen bounds model names and aliases.
const maxNameLen = 128

// CheckEngineType bounds an engine type, which names a plugin file
// (llmgw-engine-<type>).
func CheckEngineType(model, typ string) error {
	for i := 0; i < len(typ); i++ {
		c := typ[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') || len(typ) > 64 {
			return fmt.Errorf("model %q: engine %s: an engine type is up to 64 lowercase letters, digits, '_' and '-' (sim, llamacpp, or a plugin's type)", model, Bounded(typ))
		}
	}
	return nil
}

// Bounded quotes a user-supplied value for an error or a log line: at most
// 64 bytes of it, with the length of the rest.
func Bounded(s string) string {
	const keep = 64
	if len(s) <= keep {
		return fmt.Sprintf("%q", s)
	}
	cut := keep
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes more)", s[:cut], len(s)-cut)
}

// MaxLogValue bounds a user-supplied value in a log line.
const MaxLogValue = 256

// BoundedLog cuts s to MaxLogValue bytes for a log line, saying how much
// was left out.
func BoundedLog(s string) string {
	if len(s) <= MaxLogValue {
		return s
	}
	cut := MaxLogValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes more)", s[:cut], len(s)-cut)
}

// CheckName reports whether name is a valid model name or alias; kind
// ("model name", "alias of model \"chat\"") starts the error, which shows
// at most a bounded piece of name.
func CheckName(kind, name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s %s %s; a name is %s", kind, Bounded(name), why, NameRule)
	}
	switch {
	case name == "":
		return fmt.Errorf("%s is empty; a name is %s", kind, NameRule)
	case len(name) > maxNameLen:
		return bad(fmt.Sprintf("is %d bytes long", len(name)))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == ':', c == '-', c == '/':
		default:
			r, _ := utf8.DecodeRuneInString(name[i:])
			return bad(fmt.Sprintf("has %q", r))
		}
	}
	for _, part := range strings.Split(name, "/") {
		switch part {
		case "":
			return bad("has an empty part (a leading, trailing or double '/')")
		case ".", "..":
			return bad(fmt.Sprintf("has a %q part", part))
		}
	}
	return nil
}
