package sim

import (
	"bufio"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func choiceOf(out map[string]any, i int) map[string]any {
	return out["choices"].([]any)[i].(map[string]any)
}

// Stop sequences cut at the earliest place any of them appears, whatever
// their order in the list, and the choice names the one that matched.
func TestStopEarliest(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	for _, path := range []string{"/v1/completions", "/v1/chat/completions"} {
		const req = `{"model":"m","prompt":"p","messages":[{"role":"user","content":"p"}],"max_tokens":8`
		_, whole := call(t, s, path, req+`}`)
		text := content(whole, 0)
		words := strings.Fields(text)
		a, b := " "+words[5], " "+words[2]
		first := a
		if ia, ib := idx(text, a), idx(text, b); ib < ia || ib == ia && len(b) < len(a) {
			first = b
		}
		want := text[:idx(text, first)]
		for _, stops := range [][]string{{a, b}, {b, a}} {
			j, _ := json.Marshal(stops)
			_, out := call(t, s, path, req+`,"stop":`+string(j)+`}`)
			c := choiceOf(out, 0)
			if got := content(out, 0); got != want || c["finish_reason"] != "stop" || c["stop_reason"] != first {
				t.Errorf("%s, stop %q: got %q (finish %v, stop_reason %v), want %q ended by %q", path, stops, got, c["finish_reason"], c["stop_reason"], want, first)
			}
		}
	}
	_, out := call(t, s, "/v1/completions", `{"model":"m","prompt":"p","max_tokens":8}`)
	if c := choiceOf(out, 0); c["stop_reason"] != nil || c["finish_reason"] != "length" {
		t.Errorf("no stop: got stop_reason %v, finish %v", c["stop_reason"], c["finish_reason"])
	}
	// The brief's case: "e" listed first, "o" earlier in the text.
	c := choice{words: []string{"over", " the", " lake"}, finish: "length"}
	c.applyStop([]string{"e", "o"})
	if strings.Join(c.words, "") != "" || c.stop != "o" {
		t.Errorf(`stop ["e","o"] on "over the lake": got %q ended by %q, want "" ended by "o"`, strings.Join(c.words, ""), c.stop)
	}
}

func idx(s, sub string) int {
	if i := strings.Index(s, sub); i >= 0 {
		return i
	}
	return len(s)
}

// Reasoning counts among the completion's tokens: a limit bounds
// reasoning and answer together.
func TestReasoningWithinLimit(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m", Reasoning: true})
	for _, tc := range []struct {
		name, body string
		limit      float64
	}{
		{"max_tokens below the reasoning", `{"model":"m","max_tokens":6,"reasoning_effort":"high","messages":[{"role":"user","content":"x"}]}`, 6},
		{"max_completion_tokens above it", `{"model":"m","max_completion_tokens":10,"messages":[{"role":"user","content":"x"}]}`, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, out := call(t, s, "/v1/chat/completions", tc.body)
			u := out["usage"].(map[string]any)
			r := u["completion_tokens_details"].(map[string]any)["reasoning_tokens"].(float64)
			msg := choiceOf(out, 0)["message"].(map[string]any)
			words := len(strings.Fields(msg["content"].(string)))
			if u["completion_tokens"].(float64) != tc.limit || r+float64(words) != tc.limit || choiceOf(out, 0)["finish_reason"] != "length" {
				t.Errorf("limit %v: got usage %v, %d answer words, finish %v", tc.limit, u, words, choiceOf(out, 0)["finish_reason"])
			}
		})
	}
}

// logprobs asked for are given, plausible, with as many alternatives as
// asked; a request the engine cannot honour is refused naming the field.
func TestLogprobs(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	_, out := call(t, s, "/v1/chat/completions", `{"model":"m","max_tokens":5,"logprobs":true,"top_logprobs":3,"messages":[{"role":"user","content":"x"}]}`)
	lp, ok := choiceOf(out, 0)["logprobs"].(map[string]any)
	if !ok {
		t.Fatalf("chat logprobs: got %v", choiceOf(out, 0)["logprobs"])
	}
	var joined strings.Builder
	entries := lp["content"].([]any)
	for _, e := range entries {
		e := e.(map[string]any)
		joined.WriteString(e["token"].(string))
		checkTop(t, e["logprob"].(float64), e["top_logprobs"].([]any), 3)
	}
	if len(entries) != 5 || joined.String() != content(out, 0) {
		t.Errorf("chat logprobs: %d entries joining to %q, want 5 joining to %q", len(entries), joined.String(), content(out, 0))
	}

	_, out = call(t, s, "/v1/completions", `{"model":"m","max_tokens":4,"logprobs":2,"prompt":"p"}`)
	tl, ok := choiceOf(out, 0)["logprobs"].(map[string]any)
	if !ok || len(tl["tokens"].([]any)) != 4 || len(tl["token_logprobs"].([]any)) != 4 || len(tl["text_offset"].([]any)) != 4 {
		t.Fatalf("completion logprobs: got %v", choiceOf(out, 0)["logprobs"])
	}
	for _, top := range tl["top_logprobs"].([]any) {
		if len(top.(map[string]any)) != 2 {
			t.Errorf("completion top_logprobs: got %v, want 2", top)
		}
	}

	for _, tc := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{"model":"m","top_logprobs":2,"messages":[{"role":"user","content":"x"}]}`, "logprobs"},
		{"/v1/chat/completions", `{"model":"m","logprobs":true,"top_logprobs":40,"messages":[{"role":"user","content":"x"}]}`, "top_logprobs"},
		{"/v1/completions", `{"model":"m","logprobs":true,"prompt":"p"}`, "logprobs"},
	} {
		code, out := call(t, s, tc.path, tc.body)
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if code != 400 || !strings.Contains(msg, tc.field) {
			t.Errorf("%s: got %d %q, want a 400 naming %s", tc.body, code, msg, tc.field)
		}
	}
}

// checkTop checks a token's alternatives: as many as asked, the token's
// own logprob the highest, all below 0 and their probabilities summing
// to at most 1.
func checkTop(t *testing.T, lp float64, top []any, n int) {
	t.Helper()
	sum := 0.0
	for _, a := range top {
		v := a.(map[string]any)["logprob"].(float64)
		sum += math.Exp(v)
		if v > lp || v >= 0 {
			t.Errorf("alternative %v against the token's %v", a, lp)
		}
	}
	if len(top) != n || sum > 1.0000001 || lp >= 0 {
		t.Errorf("got %d alternatives summing to %v (token %v), want %d summing to at most 1", len(top), sum, lp, n)
	}
}

// A stream carries each token's logprobs in its chunk, and the stop that
// ended it in the finish chunk.
func TestStreamLogprobsAndStop(t *testing.T) {
	s := NewServer(ServerConfig{Model: "m"})
	_, whole := call(t, s, "/v1/chat/completions", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"p"}]}`)
	stop := " " + strings.Fields(content(whole, 0))[4]
	b, _ := json.Marshal(stop)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(
		`{"model":"m","max_tokens":8,"stream":true,"logprobs":true,"top_logprobs":2,"stop":`+string(b)+`,"messages":[{"role":"user","content":"p"}]}`)))
	var text, tokens strings.Builder
	var stopReason any
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta      struct{ Content string }
				Logprobs   *struct{ Content []struct{ Token string } }
				StopReason any     `json:"stop_reason"`
				Finish     *string `json:"finish_reason"`
			}
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatal(err)
		}
		c := chunk.Choices[0]
		text.WriteString(c.Delta.Content)
		if c.Logprobs != nil {
			for _, e := range c.Logprobs.Content {
				tokens.WriteString(e.Token)
			}
		}
		if c.Finish != nil {
			stopReason = c.StopReason
		}
	}
	if want := content(whole, 0)[:strings.Index(content(whole, 0), stop)]; text.String() != want || tokens.String() != want || stopReason != stop {
		t.Errorf("got %q, logprobs of %q, stop_reason %v; want %q ended by %q", text.String(), tokens.String(), stopReason, want, stop)
	}
}

// A field of the wrong type is named in the API's terms, not Go's.
func TestDecodeErrorNamesField(t *testing.T) {
	code, out := call(t, NewServer(ServerConfig{Model: "m"}), "/v1/chat/completions", `{"model":"m","max_tokens":"five","messages":[{"role":"user","content":"x"}]}`)
	msg := out["error"].(map[string]any)["message"].(string)
	if code != 400 || !strings.Contains(msg, "max_tokens must be an integer") || strings.Contains(msg, "Go") || strings.Contains(msg, "sim.") {
		t.Errorf("got %d %q", code, msg)
	}
}
