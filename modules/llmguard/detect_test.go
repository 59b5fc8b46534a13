package llmguard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// secretValues are the credentials the corpus names as {{name}},
// assembled from pieces so that no file holds a whole one.
func secretValues() map[string]string {
	pemHead := "-----BEGIN " + "RSA PRIVATE KEY-----"
	return map[string]string{
		"gh":          "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
		"slack":       "xo" + "xb-" + "2048-4096-aB3dE5gH7jK9mN1pQ3sT5vX7z",
		"google":      "AI" + "za" + "SyD9x7Qm2Lk4Jh6Gf8Ds0Ap1Zo3Xi5Cu7Vb",
		"aws":         "AK" + "IA" + "IOSFODNN7EXAMPLE",
		"provider":    "sk-" + "proj-" + "q8Zr2Lm4Xv6Nb8Pc0Wd2Yf4Hg6Jk8Ls0Qa2Tx4",
		"anthropic":   "sk-" + "ant-" + "api03-" + "Zr2Lm4Xv6Nb8Pc0Wd2Yf4Hg6Jk8Ls0Qa2Tx4q8Zr2Lm4Xv6Nb8Pc0Wd2_f4Hg6Jk8Ls0-a2Tx4",
		"stripe":      "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
		"gitlab":      "gl" + "pat-" + "xR4bN8mK2pQ7wT5vY9zA",
		"jwt":         "ey" + "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
		"pem":         pemHead + "\nMIIEowIBAAKCAQEAx3f9Qk2mZp\nq8Lr5Vt7Yw1\n-----END RSA PRIVATE KEY-----",
		"pemHead":     pemHead,
		"pemFlat":     "-----BEGIN " + "PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\nq8Lr5Vt7Yw1==\\n-----END PRIVATE KEY-----",
		"pemFlatHead": "-----BEGIN " + "PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\nq8Lr5Vt7Yw1==\\n",
		"gho":         "gh" + "o_" + "Zr2Lm4Xv6Nb8Pc0Wd2Yf4Hg6Jk8Ls0Qa2Tx4",
		"ghs":         "gh" + "s_" + "9Kc8Wd1Yf5Hg3Jt6Rs0PaZx9Qv2Lm7Nb4Kc8",
		"ghpat":       "github" + "_pat_" + "11ABCDE2Q0aB3dE5gH7jK9_mN1pQ3sT5vX7zZr2Lm4Xv6Nb8Pc0Wd2Yf4Hg6Jk8Ls0Qa2Tx4q8Zr2Lm4Xv6",
		"xoxp":        "xo" + "xp-" + "1234567890-0987654321-aB3dE5gH7jK9mN1pQ3sT5",
		"asia":        "AS" + "IA" + "Y3FDSNDKFKSIDJSW",
		"rk":          "rk" + "_live_" + "51H8s2KL9xQm4Vb7Nc1Zr5Tp",
		"bearer":      "Zx9Qv2Lm7Nb4Kc8Wd1Yf5Hg3Jt6Rs0Pa",
	}
}

// corpus returns the texts of testdata/detect/*.txt, each with the file
// and line it comes from (see testdata/detect/README for the format).
func corpus(t testing.TB) (texts, where []string) {
	files, err := filepath.Glob(filepath.Join("testdata", "detect", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	secrets := secretValues()
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			line = strings.ReplaceAll(line, `\n`, "\n")
			for k, v := range secrets {
				line = strings.ReplaceAll(line, "{{"+k+"}}", v)
			}
			if strings.Contains(line, "{{") {
				t.Fatalf("%s:%d: unknown {{name}}", f, n+1)
			}
			texts = append(texts, line)
			where = append(where, fmt.Sprintf("%s:%d", filepath.Base(f), n+1))
		}
	}
	return texts, where
}

// unmark returns the text without marks and the marked spans.
func unmark(s string) (string, []detection) {
	var b strings.Builder
	var spans []detection
	for {
		i := strings.Index(s, "[[")
		if i < 0 {
			b.WriteString(s)
			return b.String(), spans
		}
		for i+2 < len(s) && s[i+2] == '[' { // a literal [ before a mark
			i++
		}
		b.WriteString(s[:i])
		s = s[i+2:]
		bar := strings.IndexByte(s, '|')
		end := strings.Index(s, "]]")
		kind, val := s[:bar], s[bar+1:end]
		start := b.Len()
		b.WriteString(val)
		spans = append(spans, detection{start, b.Len(), kind})
		s = s[end+2:]
	}
}

// TestDetectorsPrecisionRecall scores every detector on the corpus and
// asserts a precision and a recall of at least 0.99 for each.
func TestDetectorsPrecisionRecall(t *testing.T) {
	p := &PII{}
	if err := p.Provision(caddyCtx()); err != nil {
		t.Fatal(err)
	}
	type score struct{ tp, fp, fn int }
	scores := map[string]*score{}
	get := func(k string) *score {
		if scores[k] == nil {
			scores[k] = &score{}
		}
		return scores[k]
	}
	texts, where := corpus(t)
	for li, line := range texts {
		text, want := unmark(line)
		fs, _ := p.Inspect(context.Background(), &Inspection{Stage: Input, Texts: []string{text}})
		fs = resolve(fs)
		got := map[detection]bool{}
		for _, f := range fs {
			got[detection{f.Start, f.End, f.Kind}] = true
		}
		for _, w := range want {
			if got[w] {
				get(w.Kind).tp++
				delete(got, w)
			} else {
				get(w.Kind).fn++
				t.Logf("%s: missed %s %q in %q", where[li], w.Kind, text[w.Start:w.End], text)
			}
		}
		for g := range got {
			get(g.Kind).fp++
			t.Logf("%s: false %s %q in %q", where[li], g.Kind, text[g.Start:g.End], text)
		}
	}
	kinds := make([]string, 0, len(scores))
	for k := range scores {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var all score
	for _, k := range kinds {
		s := scores[k]
		all.tp, all.fp, all.fn = all.tp+s.tp, all.fp+s.fp, all.fn+s.fn
	}
	for _, k := range append(kinds, "all") {
		s := &all
		if k != "all" {
			s = scores[k]
		}
		prec := float64(s.tp) / float64(max(s.tp+s.fp, 1))
		rec := float64(s.tp) / float64(max(s.tp+s.fn, 1))
		t.Logf("%-12s precision %.3f recall %.3f (tp %d, fp %d, fn %d)", k, prec, rec, s.tp, s.fp, s.fn)
		if prec < 0.99 || rec < 0.99 {
			t.Errorf("%s: precision %.3f, recall %.3f; want both at least 0.99", k, prec, rec)
		}
	}
	t.Logf("%d texts", len(texts))
}

func TestLuhnAndIBAN(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{{"4111111111111111", true}, {"4111111111111112", false}, {"79927398713", true}, {"0", true}} {
		if got := luhn([]byte(c.s)); got != c.want {
			t.Errorf("luhn(%s) = %v", c.s, got)
		}
	}
	for _, c := range []struct {
		s    string
		want bool
	}{{"GB82WEST12345698765432", true}, {"GB82WEST12345698765433", false}, {"DE89370400440532013000", true}} {
		if got := ibanValid([]byte(c.s)); got != c.want {
			t.Errorf("ibanValid(%s) = %v", c.s, got)
		}
	}
}

// TestCorpusRedactedAndRestored sends every corpus text through the guard
// (pii on input and output, redact) to a model that echoes what it sees,
// whole and streamed: the model sees every marked value replaced and every
// other byte unchanged (so a key's header never swallows the question
// after it), and the client gets the original text back.
func TestCorpusRedactedAndRestored(t *testing.T) {
	texts, where := corpus(t)
	placeholder := regexp.MustCompile(`<[A-Z_]+_[0-9]+>`)
	for _, stream := range []bool{false, true} {
		next := &echoRouter{}
		g := newGuard(t, &Guardrails{}, &PII{})
		for li, line := range texts {
			text, want := unmark(line)
			code, got, _ := call(t, g, next, text, stream, nil)
			if !stream {
				got = strings.TrimSuffix(got, "|stop")
			}
			if code != 200 || got != text {
				t.Errorf("%s (stream %v): got %d %q, want %q", where[li], stream, code, got, text)
			}
			var seen struct {
				Messages []struct{ Content string } `json:"messages"`
			}
			if err := json.Unmarshal([]byte(next.seen.Load().(string)), &seen); err != nil {
				t.Fatal(err)
			}
			upstream := seen.Messages[0].Content
			// The model's text is the original with each marked span, and
			// nothing else, replaced by a placeholder.
			var b strings.Builder
			prev := 0
			for _, w := range want {
				b.WriteString(regexp.QuoteMeta(text[prev:w.Start]))
				b.WriteString(`<` + w.Kind + `_[0-9]+>`)
				prev = w.End
			}
			b.WriteString(regexp.QuoteMeta(text[prev:]))
			if !regexp.MustCompile(`^` + b.String() + `$`).MatchString(upstream) {
				t.Errorf("%s (stream %v): model saw %q", where[li], stream, upstream)
			}
			if n := len(placeholder.FindAllString(upstream, -1)); n != len(want) {
				t.Errorf("%s: %d placeholders, want %d", where[li], n, len(want))
			}
		}
	}
}
