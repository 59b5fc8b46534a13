package kbindex

import (
	"math"
	"strings"
	"testing"
)

// TestCountTokensNearCl100k holds the estimate to within 12% of cl100k on
// each sample and 4% over all of them.
func TestCountTokensNearCl100k(t *testing.T) {
	got, want := 0, 0
	for _, s := range tokenSamples {
		n := CountTokens(s.text)
		off := float64(n-s.tokens) / float64(s.tokens)
		t.Logf("%-5s cl100k %3d estimate %3d (%+.1f%%)", s.name, s.tokens, n, 100*off)
		if math.Abs(off) > 0.12 {
			t.Errorf("%s: estimate %d, cl100k %d: off by %.0f%%", s.name, n, s.tokens, 100*off)
		}
		got += n
		want += s.tokens
	}
	if off := float64(got-want) / float64(want); math.Abs(off) > 0.04 {
		t.Errorf("over all samples: estimate %d, cl100k %d: off by %.1f%%", got, want, 100*off)
	}
}

func TestCountTokensSmall(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{{"", 0}, {"hello", 1}, {"  ", 1}, {strings.Repeat("x ", 10), 10}} {
		if got := CountTokens(c.in); got != c.want {
			t.Errorf("CountTokens(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestValidateChunking(t *testing.T) {
	for _, c := range []struct {
		max, overlap int
		bad          string
	}{
		{800, 400, ""}, {100, 0, ""}, {4096, 2048, ""},
		{99, 0, "between 100 and 4096"}, {4097, 0, "between 100 and 4096"},
		{800, -1, "0 or more"}, {800, 401, "between 0 and 400"},
	} {
		err := ValidateChunking(c.max, c.overlap)
		if (err == nil) != (c.bad == "") || err != nil && !strings.Contains(err.Error(), c.bad) {
			t.Errorf("ValidateChunking(%d, %d) = %v, want an error saying %q", c.max, c.overlap, err, c.bad)
		}
	}
}
