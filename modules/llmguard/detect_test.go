package llmguard

import (
	"context"
	"sort"
	"strings"
	"testing"
)

// The corpus: texts with the values a detector must find marked as
// [[KIND|value]]. Everything unmarked must not be found. Secrets are
// assembled from pieces so that this file holds no whole credential.
func corpus() []string {
	gh := "gh" + "p_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
	slack := "xo" + "xb-" + "2048-4096-aB3dE5gH7jK9mN1pQ3sT5vX7z"
	google := "AI" + "za" + "SyD9x7Qm2Lk4Jh6Gf8Ds0Ap1Zo3Xi5Cu7Vb"
	aws := "AK" + "IA" + "IOSFODNN7EXAMPLE"
	provider := "sk-" + "proj-" + "q8Zr2Lm4Xv6Nb8Pc0Wd2Yf4Hg6Jk8Ls0Qa2Tx4"
	jwt := "ey" + "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pem := "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAx3f9Qk2mZp\nq8Lr5Vt7Yw1\n-----END RSA PRIVATE KEY-----"
	bearer := "Zx9Qv2Lm7Nb4Kc8Wd1Yf5Hg3Jt6Rs0Pa"
	return []string{
		// emails
		"Write to [[EMAIL|ana@example.com]] today.",
		"cc: [[EMAIL|first.last+tag@sub.example.co.uk]], [[EMAIL|x_y@corp.io]]",
		"<[[EMAIL|j.doe@mail.example.org]]>",
		"Her address is [[EMAIL|Maria.Lopez-Garcia@empresa.es]].",
		"not an email: user@localhost, @handle, a@b, foo at bar dot com, 3@5",
		"the decorator @property and npm scope @types/node",
		// cards
		"Card [[CARD|4111 1111 1111 1111]] exp 12/29",
		"pay with [[CARD|5555555555554444]] please",
		"amex [[CARD|378282246310005]], discover [[CARD|6011111111111117]]",
		"jcb [[CARD|3530111333300000]] and [[CARD|4012-8888-8888-1881]]",
		"mastercard 2-series: [[CARD|2223003122003222]]; diners [[CARD|30569309025904]]",
		"[[CARD|5105 1051 0510 5100]]",
		"invalid cards: 4111 1111 1111 1112, 1234 5678 9012 3456, 5555555555554445",
		"order number 4000000000000001 is not a card (fails Luhn)",
		"tracking 1Z999AA10123456784 and isbn 978-3-16-148410-0",
		// IBANs
		"IBAN [[IBAN|GB82 WEST 1234 5698 7654 32]]",
		"Überweisung an [[IBAN|DE89370400440532013000]] bitte",
		"virement [[IBAN|FR1420041010050500013M02606]]; rekening [[IBAN|NL91ABNA0417164300]]",
		"cuenta [[IBAN|ES9121000418450200051332]], konto [[IBAN|CH9300762011623852957]]",
		"[[IBAN|BE68539007547034]]",
		"bad IBANs: GB82 WEST 1234 5698 7654 33, DE89370400440532013001, XX12345678901234",
		"the part number DE12ABC is not an IBAN",
		// phones
		"call [[PHONE|+1 415 555 2671]] or [[PHONE|+44 20 7946 0958]]",
		"office [[PHONE|(555) 123-4567]], mobile [[PHONE|555-123-4567]]",
		"fax [[PHONE|555.123.4567]]",
		"Berlin [[PHONE|+49 30 901820]]; London [[PHONE|020 7946 0958]]",
		"Paris [[PHONE|06 12 34 56 78]] or [[PHONE|+33 6 12 34 56 78]]",
		"Tokyo [[PHONE|+81-3-1234-5678]]",
		"version 2.10.3 released in 2024 with 15000 downloads",
		"order 12345, room 101, call at 10:30, steps 1-2-3",
		"the ratio was 3.14159 and the year 1999",
		// national ids
		"DNI [[NATIONAL_ID|12345678Z]], NIE [[NATIONAL_ID|X1234567L]]",
		"SSN [[NATIONAL_ID|123-45-6789]] and [[NATIONAL_ID|078-05-1120]]",
		"personnummer [[NATIONAL_ID|811218-9876]]",
		"invalid: 12345678A, 000-12-3456, 666-12-3456, 811218-9875",
		// IPs
		"server at [[IP|192.168.1.20]] and [[IP|10.0.0.1]].",
		"ipv6 [[IP|2001:db8::1]] link-local [[IP|fe80::1ff:fe23:4567:890a]]",
		"not IPs: 999.1.1.1, 1.2.3, 12:30:45, a::b::c",
		// secrets
		"aws key " + "[[SECRET|" + aws + "]]",
		"token: [[SECRET|" + gh + "]]",
		"slack [[SECRET|" + slack + "]]",
		"maps [[SECRET|" + google + "]]",
		"OPENAI_API_KEY=[[SECRET|" + provider + "]]",
		"jwt [[SECRET|" + jwt + "]]",
		"key:\n[[SECRET|" + pem + "]]\n",
		"Authorization: Bearer [[SECRET|" + bearer + "]]",
		"Bearer aaaaaaaaaaaaaaaaaaaaaaaa is not random; the bearer of good news",
		"git sha 3f786850e387550fdab836ed7e6dc881de23001b in a commit message",
		"a sketch-of-a-plan and sk-short",
		// mixed
		"Hi, I'm Ana ([[EMAIL|ana@example.com]], [[PHONE|+34 612 345 678]]); pay [[CARD|4111111111111111]] to [[IBAN|ES9121000418450200051332]].",
	}
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
	for _, line := range corpus() {
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
				t.Errorf("missed %s %q in %q", w.Kind, text[w.Start:w.End], text)
			}
		}
		for g := range got {
			get(g.Kind).fp++
			t.Errorf("false %s %q in %q", g.Kind, text[g.Start:g.End], text)
		}
	}
	kinds := make([]string, 0, len(scores))
	for k := range scores {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		s := scores[k]
		prec := float64(s.tp) / float64(max(s.tp+s.fp, 1))
		rec := float64(s.tp) / float64(max(s.tp+s.fn, 1))
		t.Logf("%-12s precision %.3f recall %.3f (tp %d, fp %d, fn %d)", k, prec, rec, s.tp, s.fp, s.fn)
	}
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
