package llmguard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/openai"
)

// testVault holds values of several kinds, one with multi-byte runes and
// one that needs JSON escaping.
func testVault() *vault {
	v := &vault{}
	v.placeholder(KindEmail, "ana@example.com")
	v.placeholder(KindCard, "4111 1111 1111 1111")
	v.placeholder("NAME", "Zoë Ærø 日本語")
	v.placeholder(KindEmail, `b"q\@x.io`)
	v.placeholder(KindPhone, "+44 20 7946 0958")
	return v
}

// reference restores by plain replacement of every placeholder.
func reference(v *vault, s string) string {
	var pairs []string
	for p, val := range v.values {
		pairs = append(pairs, p, val)
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

func TestRestoreWhole(t *testing.T) {
	v := testVault()
	for _, c := range []struct{ in, want string }{
		{"mail <EMAIL_1> now", "mail ana@example.com now"},
		{"<EMAIL_1><CARD_1>", "ana@example.com4111 1111 1111 1111"},
		{"a < b and <EMAIL_9> and <EMAIL_1", "a < b and <EMAIL_9> and <EMAIL_1"},
		{"<<NAME_1>>", "<Zoë Ærø 日本語>"},
		{"no placeholders", "no placeholders"},
	} {
		if got, rest := v.restore(c.in, true); got != c.want || rest != "" {
			t.Errorf("restore(%q) = %q, %q; want %q", c.in, got, rest, c.want)
		}
	}
	// Not final: a possible placeholder start is held back, and only that.
	for _, c := range []struct{ in, out, rest string }{
		{"mail <EM", "mail ", "<EM"},
		{"mail <", "mail ", "<"},
		{"x <EMAIL_1", "x ", "<EMAIL_1"},
		{"x <ZZ", "x <ZZ", ""},                       // no placeholder starts so
		{"x <EMAIL_1234567", "x <EMAIL_1234567", ""}, // longer than any
		{"a<b", "a<b", ""},
	} {
		if got, rest := v.restore(c.in, false); got != c.out || rest != c.rest {
			t.Errorf("restore(%q, false) = %q, %q; want %q, %q", c.in, got, rest, c.out, c.rest)
		}
	}
}

// streamThrough sends deltas as a chat stream through an output writer,
// writing the bytes in pieces, and returns what the client got.
func streamThrough(t testing.TB, v *vault, checks []Check, deltas []string, writes []int, htmlEscape bool) (string, []string, string) {
	return streamThroughWith(t, v, checks, 0, deltas, writes, htmlEscape)
}

func streamThroughWith(t testing.TB, v *vault, checks []Check, lookahead int, deltas []string, writes []int, htmlEscape bool) (string, []string, string) {
	g := &Guardrails{Window: 256, Lookahead: lookahead, OutputBlock: "error", Refusal: "no", logger: zap.NewNop()}
	st := &state{g: g, vault: *v, model: "m"}
	rec := httptest.NewRecorder()
	ow := newOutputWriter(rec, st, &openai.Request{Endpoint: openai.ChatCompletions, Stream: true}, checks)
	var stream bytes.Buffer
	for _, d := range deltas {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(htmlEscape)
		_ = enc.Encode(d)
		lit := bytes.TrimSpace(b.Bytes())
		stream.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":`)
		stream.Write(lit)
		stream.WriteString("},\"finish_reason\":null}]}\n\n")
	}
	stream.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	stream.WriteString("data: [DONE]\n\n")
	ow.Header().Set("Content-Type", "text/event-stream")
	ow.WriteHeader(http.StatusOK)
	b := stream.Bytes()
	for i := 0; len(b) > 0; i++ {
		n := len(b)
		if len(writes) > 0 {
			n = min(writes[i%len(writes)], len(b))
		}
		if _, err := ow.Write(b[:n]); err != nil {
			break
		}
		b = b[n:]
	}
	ow.finish()
	return parseClient(t, rec.Body.String())
}

// parseClient reads a stream as a client would: the content deltas, and
// the error event's message if any.
func parseClient(t testing.TB, body string) (string, []string, string) {
	var all strings.Builder
	var deltas []string
	errMsg := ""
	done := false
	for _, ev := range strings.Split(body, "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event without data: %q", ev)
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		if done {
			t.Fatalf("event after [DONE]: %q", ev)
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("client cannot decode %q: %v", data, err)
		}
		if c.Error != nil {
			errMsg = c.Error.Message
			continue
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				deltas = append(deltas, *ch.Delta.Content)
				all.WriteString(*ch.Delta.Content)
			}
		}
	}
	return all.String(), deltas, errMsg
}

// cutRunes cuts s into pieces whose byte lengths follow sizes, moved to
// rune boundaries (a JSON string holds whole runes).
func cutRunes(s string, sizes []byte) []string {
	var out []string
	for i := 0; len(s) > 0; i++ {
		n := len(s)
		if len(sizes) > 0 {
			n = min(int(sizes[i%len(sizes)]%11)+1, len(s))
		}
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func writeSizes(b []byte) []int {
	var out []int
	for _, c := range b {
		out = append(out, int(c%17)+1)
	}
	return out
}

func FuzzStreamRestore(f *testing.F) {
	f.Add("Write to <EMAIL_1> or call <PHONE_1>.", []byte{0, 1, 2, 3})
	f.Add("<CARD_1><EMAIL_2><NAME_1>", []byte{0})
	f.Add("a < b, <EMAIL_9>, <EMAIL_, <<EMAIL_1>>", []byte{5, 9, 200, 3, 7})
	f.Add("日本語 <NAME_1> é <EMAIL_1>", []byte{1, 1, 1, 1, 1, 1})
	f.Add("ends with <EMAIL_1", []byte{2})
	f.Add("ends with <EMAIL_1>", []byte{255, 254})
	f.Fuzz(func(t *testing.T, text string, cuts []byte) {
		text = strings.ToValidUTF8(text, "?")
		v := testVault()
		want := reference(v, text)
		deltas := cutRunes(text, cuts)
		got, _, errMsg := streamThrough(t, v, nil, deltas, writeSizes(cuts), len(cuts) > 0 && cuts[0]&1 == 1)
		if errMsg != "" {
			t.Fatalf("error event: %s", errMsg)
		}
		if got != want {
			t.Fatalf("client got %q, want %q (deltas %q)", got, want, deltas)
		}
		for p := range v.values {
			if strings.Contains(want, p) {
				continue
			}
			if strings.Contains(got, p) {
				t.Fatalf("placeholder %s reached the client: %q", p, got)
			}
		}
	})
}

func TestStreamRestoreEveryCut(t *testing.T) {
	v := testVault()
	text := "Dear <NAME_1>, we wrote to <EMAIL_1> and <EMAIL_2>; card <CARD_1>. Bye < 3"
	want := reference(v, text)
	for i := 0; i <= len(text); i++ {
		for j := i; j <= len(text); j++ {
			if !utf8.RuneStart(text[min(i, len(text)-1)]) || (j < len(text) && !utf8.RuneStart(text[j])) {
				continue
			}
			deltas := []string{text[:i], text[i:j], text[j:]}
			got, _, _ := streamThrough(t, v, nil, deltas, nil, j%2 == 0)
			if got != want {
				t.Fatalf("cut at %d,%d: got %q, want %q", i, j, got, want)
			}
		}
	}
}

// FuzzStreamBlock: with an output check that blocks XYZZY and a lookahead
// as long as the match, the client gets exactly the restored text before
// the first match, then an error, and nothing of the match.
func FuzzStreamBlock(f *testing.F) {
	f.Add("hello <EMAIL_1> XYZZY after", []byte{1, 2, 3})
	f.Add("XYZZY", []byte{0})
	f.Add("<NAME_1>XYZ", []byte{4, 4})
	f.Add("no match here <CARD_1>", []byte{9, 1})
	f.Fuzz(func(t *testing.T, text string, cuts []byte) {
		text = strings.ToValidUTF8(text, "?")
		v := testVault()
		re := &Regex{Scope: Scope{On: []Stage{Output}}, Deny: []Pattern{{Name: "magic", Regex: "XYZZY"}}}
		if err := re.Provision(caddyCtx()); err != nil {
			t.Fatal(err)
		}
		got, _, errMsg := streamThroughWith(t, v, []Check{re}, 5, cutRunes(text, cuts), writeSizes(cuts), false)
		idx := strings.Index(text, "XYZZY")
		if idx < 0 {
			if got != reference(v, text) || errMsg != "" {
				t.Fatalf("got %q (error %q), want %q", got, errMsg, reference(v, text))
			}
			return
		}
		if want := reference(v, text[:idx]); got != want || !strings.Contains(errMsg, `"magic"`) && !strings.Contains(errMsg, `"regex"`) {
			t.Fatalf("got %q (error %q), want %q and an error", got, errMsg, want)
		}
	})
}
