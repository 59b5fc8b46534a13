package catalog

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// IDRule is the rule every identifier the admin API takes follows, other
// than model names (NameRule): key ids, the names of organisations,
// teams and projects, llm_admin's token ids. Such an id appears in paths
// (/llm/keys/{id}), in usage nodes (k:<id>, p:<org>/<team>/<project>),
// in audit lines and in logs.
const IDRule = "1 to 128 bytes of printable UTF-8 (letters, digits, punctuation, symbols); no spaces, control characters, '/' or ':', and not . or .."

// maxIDLen bounds identifiers.
const maxIDLen = 128

// CheckID reports whether id follows IDRule; kind ("key id", "project
// name") starts the error, which shows at most a bounded piece of id.
func CheckID(kind, id string) error {
	bad := func(why string) error {
		return fmt.Errorf("%s %s %s; an id is %s", kind, Bounded(id), why, IDRule)
	}
	switch {
	case id == "":
		return fmt.Errorf("%s is empty; an id is %s", kind, IDRule)
	case len(id) > maxIDLen:
		return bad(fmt.Sprintf("is %d bytes long", len(id)))
	case id == "." || id == "..":
		return bad("is a path segment of its own")
	}
	for i, r := range id {
		switch {
		case r == utf8.RuneError && !validRuneAt(id, i):
			return bad("is not valid UTF-8")
		case r == '/' || r == ':':
			return bad(fmt.Sprintf("has %q", r))
		case unicode.IsSpace(r) && !unicode.IsControl(r):
			return bad(fmt.Sprintf("has a space (%U)", r))
		case !unicode.IsPrint(r):
			return bad(fmt.Sprintf("has the control or unprintable character %U", r))
		}
	}
	return nil
}

// validRuneAt reports whether the rune at s[i] is a real U+FFFD rather
// than a byte that is not UTF-8.
func validRuneAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size > 1
}
