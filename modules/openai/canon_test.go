package openai

import (
	"encoding/json"
	"testing"
)

func TestAppendCanonical(t *testing.T) {
	same := [][2]string{
		{`{"b":1,"a":[1, 2 ,{"y":true,"x":null}]}`, `{ "a" : [1,2,{"x":null,"y":true}], "b":1 }`},
		{`{"s":"caf\u00e9 \/ \"q\" \\ \n\t"}`, `{"s":"café / \"q\" \\ \n\u0009"}`},
		{`{"s":"\ud83d\ude00"}`, `{"s":"😀"}`},
		{`{"s":"\u0041\u0001"}`, `{"s":"A\u0001"}`},
		{`{"a":1,"a":2}`, `{"a":2}`},
		{`{"k\u0065y":"v"}`, `{"key":"v"}`},
		{"[\n\t\"x\"\r\n]", `["x"]`},
	}
	for _, c := range same {
		a, b := string(AppendCanonical(nil, []byte(c[0]))), string(AppendCanonical(nil, []byte(c[1])))
		if a != b {
			t.Errorf("%s and %s differ: %s, %s", c[0], c[1], a, b)
		}
		var x any
		if err := json.Unmarshal([]byte(a), &x); err != nil {
			t.Errorf("canonical form of %s is not JSON: %s: %v", c[0], a, err)
		}
	}
	differ := [][2]string{
		{`{"a":1}`, `{"a":1.0}`},
		{`{"a":"x"}`, `{"a":"X"}`},
		{`{"a":[1,2]}`, `{"a":[2,1]}`},
		{`{"a":"\\n"}`, `{"a":"\n"}`},
		{`{"a":{"b":1}}`, `{"a":{"b":1},"c":null}`},
		{`{"s":"http to https"}`, `{"s":"https to http"}`},
	}
	for _, c := range differ {
		if a, b := string(AppendCanonical(nil, []byte(c[0]))), string(AppendCanonical(nil, []byte(c[1]))); a == b {
			t.Errorf("%s and %s have one canonical form: %s", c[0], c[1], a)
		}
	}
}

func TestAppendUnquoted(t *testing.T) {
	for _, q := range []string{`"plain"`, `"line\nbreak \"quoted\" \\ \/ \u00e9 \ud83d\ude00 \ud800 x"`, `""`} {
		var want string
		if err := json.Unmarshal([]byte(q), &want); err != nil {
			t.Fatal(err)
		}
		if got := string(AppendUnquoted(nil, []byte(q))); got != want {
			t.Errorf("AppendUnquoted(%s) = %q, want %q", q, got, want)
		}
	}
}

func BenchmarkAppendCanonical(b *testing.B) {
	body := []byte(`{"model":"sim-chat","temperature":0,"max_tokens":64,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Write a short poem about the sea and the mountains, in four lines.\nThank you!"}]}`)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendCanonical(buf[:0], body)
	}
}

func TestFirstUserEnd(t *testing.T) {
	for _, c := range []struct{ msgs, want string }{
		{`[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]`,
			`[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}`},
		{` [ {"content": "hi", "role" : "user"} , {"role":"user","content":"again"}]`, ` [ {"content": "hi", "role" : "user"}`},
		{`[{"role":"developer","content":"say \"role\":\"user\" here"},{"role":"user","content":[{"type":"text","text":"x"}]}]`,
			`[{"role":"developer","content":"say \"role\":\"user\" here"},{"role":"user","content":[{"type":"text","text":"x"}]}`},
		{`[{"role":"system","content":"only a system prompt"}]`, ``},
		{`[]`, ``},
		{``, ``},
		{`{"role":"user"}`, ``},
		{`[{"role":"user","content":"cut`, ``},
	} {
		if got := c.msgs[:FirstUserEnd([]byte(c.msgs))]; got != c.want {
			t.Errorf("FirstUserEnd(%s) = %q, want %q", c.msgs, got, c.want)
		}
	}
}
