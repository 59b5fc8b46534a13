package llmguard

import (
	"regexp"
	"testing"
)

func TestRequiredLiteral(t *testing.T) {
	for _, c := range []struct {
		expr, lit string
		fold      bool
	}{
		{`(?i)project\s+(zeus|hera)`, "project", true},
		{`EMP-[0-9]{6}`, "EMP-", false},
		{`foo|barbaz`, "", false},
		{`\d+`, "", false},
		{`secret_word`, "secret_word", false},
	} {
		p := requiredLiteral(c.expr)
		if p.lit != c.lit || (p.lit != "" && p.fold != c.fold) {
			t.Errorf("requiredLiteral(%s) = %+v", c.expr, p)
		}
	}
	for _, c := range []struct {
		p    prefilter
		text string
		want bool
	}{
		{prefilter{"project", true}, "the PROJECT Zeus", true},
		{prefilter{"project", true}, "Project", true},
		{prefilter{"project", true}, "nothing", false},
		{prefilter{"project", true}, "projec", false},
		{prefilter{"project", true}, "PROJEC\rT", false},
		{prefilter{"emp-", true}, "id emp\r12", false},
		{prefilter{"emp-", true}, "id EMP-12", true},
		{prefilter{"EMP-", false}, "id emp-12", false},
		// Outside ASCII the expression decides: (?i)s matches "ſ" and
		// (?i)k the Kelvin sign, which lower-casing leaves apart.
		{prefilter{"password", true}, "my pa\u017f\u017fword", true},
		{prefilter{"key", true}, "the \u212aEY", true},
		{prefilter{"project", true}, "caf\u00e9", true},
	} {
		if got := c.p.mayMatch(c.text); got != c.want {
			t.Errorf("%+v.mayMatch(%q) = %v, want %v", c.p, c.text, got, c.want)
		}
	}
	// Each text the prefilter lets through or not, the expression agrees
	// where it says no.
	re := regexp.MustCompile(`(?i)password`)
	pre := requiredLiteral(re.String())
	for _, text := range []string{"PaSsWoRd", "pa\u017f\u017fword", "passw0rd", "a pass word", "\u212a password"} {
		if re.MatchString(text) && !pre.mayMatch(text) {
			t.Errorf("the prefilter refuses %q, which %s matches", text, re)
		}
	}
}
