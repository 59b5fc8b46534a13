package llmguard

import "testing"

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
	lower := ""
	if !(prefilter{"project", true}).mayMatch("the PROJECT Zeus", &lower) || (prefilter{"project", true}).mayMatch("nothing", new(string)) {
		t.Error("mayMatch")
	}
}
