package openai

import (
	"strings"
	"testing"
)

func TestSkipString(t *testing.T) {
	for _, s := range []string{`""`, `"a"`, `"\""`, `"\\"`, `"ab\\\"cd"`, `"0123456789abcdef\"xyz"`, `"0123456789abcde\\"`,
		`"0123456789abcdef0123456789\\\\\\\"\\"`, `"` + strings.Repeat(`\"`, 40) + `"`} {
		if got := SkipString([]byte(s+`,"x"`), 0); got != len(s) {
			t.Errorf("%s: got %d, want %d", s, got, len(s))
		}
	}
	if got := SkipString([]byte(`"0123456789abcdef\"`), 0); got != -1 {
		t.Errorf("unterminated: got %d", got)
	}
}
