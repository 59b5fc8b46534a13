package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// maxOutputModels: two sim models whose answers are 64 tokens long when
// the request sets no length; one of them has a max_output.
func maxOutputModels(capped int) string {
	return fmt.Sprintf(`
		model capped {
			engine sim
			option max_tokens 64
			max_output %d
		}
		model free {
			engine sim
			option max_tokens 64
		}`, capped)
}

// maxOutputChat sends a chat request with key, asking for maxTokens
// tokens (0: none), and returns the answer or the API's error.
func maxOutputChat(g *gateway, key, model string, maxTokens int64) (*openai.ChatCompletion, *openai.Error) {
	p := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about rivers")}}
	if maxTokens > 0 {
		p.MaxTokens = openai.Int(maxTokens)
	}
	return chatErrWith(keyClient(g, key), p)
}

// v1ModelsMaxOutput is each model's max_output in GET /v1/models, as the
// key sees it.
func v1ModelsMaxOutput(t *testing.T, g *gateway, key string) map[string]int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, g.base+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID    string `json:"id"`
			LLMGW struct {
				MaxOutput int64 `json:"max_output"`
			} `json:"llmgw"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, m := range list.Data {
		out[m.ID] = m.LLMGW.MaxOutput
	}
	return out
}

// TestMaxOutput: a model's max_output and a key's lower one, as clients
// see them. Asking for more is a 400 in the client's API that names the
// limit and who sets it (chat completions, Anthropic Messages, the
// Responses API); asking nothing gets the limit as max_tokens (the sim
// engine's answer is then that long, and cut: finish_reason length,
// where it is 64 tokens long and ends with stop otherwise); /v1/models,
// GET /llm/models and ctl models show it; a reload that changes it, and
// ctl model set --max-output, keep the model's replica and apply at the
// next request.
func TestMaxOutput(t *testing.T) {
	// k1 may have 5 tokens an answer; k2 has no limit of its own.
	tenants := tenancyBlock("", "", "", "max_output 5")
	g := startQuotaGateway(t, maxOutputModels(8)+tenants, "")

	t.Run("chat over the model's limit", func(t *testing.T) {
		_, e := maxOutputChat(g, "secret-2", "capped", 9000)
		want := `max_tokens is 9000, over the max_output of 8 tokens set for model "capped"; ask for 8 or fewer`
		if e == nil || e.StatusCode != 400 || e.Message != want || e.Param != "max_tokens" {
			t.Fatalf("got %+v, want 400 saying %q", e, want)
		}
	})
	t.Run("chat asking nothing gets the model's limit", func(t *testing.T) {
		resp, e := maxOutputChat(g, "secret-2", "capped", 0)
		if e != nil || resp.Usage.CompletionTokens != 8 || resp.Choices[0].FinishReason != "length" {
			t.Fatalf("got %s (%v), want an answer of 8 tokens cut by length", lengthOf(resp), e)
		}
		resp, e = maxOutputChat(g, "secret-2", "free", 0)
		if e != nil || resp.Usage.CompletionTokens != 64 || resp.Choices[0].FinishReason != "stop" {
			t.Fatalf("the model without max_output: got %s (%v), want its own 64 tokens", lengthOf(resp), e)
		}
		resp, e = maxOutputChat(g, "secret-2", "capped", 8)
		if e != nil || resp.Usage.CompletionTokens != 8 {
			t.Fatalf("asking exactly the limit: got %s (%v)", lengthOf(resp), e)
		}
	})
	t.Run("a stream asking nothing gets the key's limit", func(t *testing.T) {
		c := keyClient(g, "secret-1")
		stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
			Model: "capped", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me about rivers")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		acc, _ := accumulateChat(t, stream)
		if words := len(strings.Fields(acc.Choices[0].Message.Content)); words != 5 || acc.Usage.CompletionTokens != 5 {
			t.Errorf("streamed answer: %d words, usage %d completion tokens; want 5 (k1's max_output)", words, acc.Usage.CompletionTokens)
		}
	})
	t.Run("the key's lower limit wins", func(t *testing.T) {
		for _, model := range []string{"capped", "free"} {
			resp, e := maxOutputChat(g, "secret-1", model, 0)
			if e != nil || resp.Usage.CompletionTokens != 5 {
				t.Fatalf("%s with k1: got %s (%v), want 5 tokens", model, lengthOf(resp), e)
			}
		}
		_, e := maxOutputChat(g, "secret-1", "capped", 6)
		want := `max_tokens is 6, over the max_output of 5 tokens set for your key k1; ask for 5 or fewer`
		if e == nil || e.StatusCode != 400 || e.Message != want {
			t.Fatalf("got %+v, want 400 saying %q", e, want)
		}
	})
	t.Run("anthropic messages", func(t *testing.T) {
		code, body := maxOutputPost(t, g, "/v1/messages", "x-api-key", `{"model":"capped","max_tokens":9000,"messages":[{"role":"user","content":"hi"}]}`)
		want := `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens is 9000, over the max_output of 8 tokens set for model \"capped\"; ask for 8 or fewer"}}`
		if code != 400 || body != want {
			t.Fatalf("got %d %.300s, want 400 %s", code, body, want)
		}
		code, body = maxOutputPost(t, g, "/v1/messages", "x-api-key", `{"model":"capped","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
		if code != 200 || !strings.Contains(body, `"output_tokens":8`) || !strings.Contains(body, `"stop_reason":"max_tokens"`) {
			t.Fatalf("at the limit: got %d %.300s", code, body)
		}
	})
	t.Run("responses", func(t *testing.T) {
		code, body := maxOutputPost(t, g, "/v1/responses", "Authorization", `{"model":"capped","max_output_tokens":9000,"input":"hi"}`)
		if code != 400 || !strings.Contains(body, `max_output_tokens is 9000, over the max_output of 8 tokens set for model \"capped\"`) || !strings.Contains(body, `"param":"max_output_tokens"`) {
			t.Fatalf("got %d %.300s, want 400 naming max_output_tokens", code, body)
		}
		code, body = maxOutputPost(t, g, "/v1/responses", "Authorization", `{"model":"capped","input":"hi"}`)
		if code != 200 || !strings.Contains(body, `"output_tokens":8`) || !strings.Contains(body, `"max_output_tokens":8`) {
			t.Fatalf("asking nothing: got %d %.300s, want 8 output tokens and max_output_tokens 8", code, body)
		}
	})
	t.Run("listed", func(t *testing.T) {
		if got := v1ModelsMaxOutput(t, g, "secret-2"); got["capped"] != 8 || got["free"] != 0 {
			t.Errorf("/v1/models for k2: got %v, want capped 8 and free none", got)
		}
		if got := v1ModelsMaxOutput(t, g, "secret-1"); got["capped"] != 5 || got["free"] != 5 {
			t.Errorf("/v1/models for k1: got %v, want 5 for both", got)
		}
		if m := g.models()["capped"]; m.MaxOutput != 8 {
			t.Errorf("GET /llm/models: max_output %d, want 8", m.MaxOutput)
		}
		out, err := exec.Command(binary, "ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin), "models").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "MAX OUTPUT") || !ctlRowHas(string(out), "capped", "8") {
			t.Errorf("ctl models: %v\n%s", err, out)
		}
	})

	// A reload that lowers the limit keeps the replica and applies at once.
	pid := g.readyReplicas("capped", 1)[0].PID
	g.reload(maxOutputModels(3)+tenants, "")
	waitFor(t, 10*time.Second, "the reloaded limit", func() bool { return g.models()["capped"].MaxOutput == 3 })
	if now := g.readyReplicas("capped", 1)[0].PID; now != pid {
		t.Errorf("the reload replaced the replica (pid %d, was %d); changing max_output should keep it", now, pid)
	}
	resp, e := maxOutputChat(g, "secret-2", "capped", 0)
	if e != nil || resp.Usage.CompletionTokens != 3 {
		t.Fatalf("after the reload: got %s (%v), want 3 tokens", lengthOf(resp), e)
	}
	if _, e := maxOutputChat(g, "secret-2", "capped", 4); e == nil || e.StatusCode != 400 || !strings.Contains(e.Message, "max_output of 3 tokens") {
		t.Fatalf("after the reload, 4 tokens: got %+v, want 400 naming 3", e)
	}

	// Changed at runtime through ctl: the replica stays, the next request
	// sees it; 0 removes it.
	ctl := func(args ...string) string {
		out, err := exec.Command(binary, append([]string{"ctl", "--admin", fmt.Sprintf("127.0.0.1:%d", g.admin)}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := ctl("model", "set", "capped", "--max-output", "2"); !strings.Contains(out, "max output 2") {
		t.Errorf("ctl model set --max-output 2: %s", out)
	}
	if resp, e := maxOutputChat(g, "secret-2", "capped", 0); e != nil || resp.Usage.CompletionTokens != 2 {
		t.Errorf("after ctl model set --max-output 2: got %s (%v), want 2 tokens", lengthOf(resp), e)
	}
	ctl("model", "set", "capped", "--max-output", "0")
	if resp, e := maxOutputChat(g, "secret-2", "capped", 0); e != nil || resp.Usage.CompletionTokens != 64 {
		t.Errorf("after ctl model set --max-output 0: got %s (%v), want the engine's own 64 tokens", lengthOf(resp), e)
	}
	if now := g.readyReplicas("capped", 1)[0].PID; now != pid {
		t.Errorf("changing max_output at runtime replaced the replica (pid %d, was %d)", now, pid)
	}

	// A runtime key's limit, set through ctl keys limits.
	code, body := g.adminPost("/llm/keys", `{"project":"acme/research/alpha","id":"runner"}`)
	var k struct {
		Secret string `json:"secret"`
	}
	if code != 201 || json.Unmarshal(body, &k) != nil || k.Secret == "" {
		t.Fatalf("creating a key: %d %s", code, body)
	}
	ctl("keys", "limits", "runner", "--max-output", "4")
	if resp, e := maxOutputChat(g, k.Secret, "free", 0); e != nil || resp.Usage.CompletionTokens != 4 {
		t.Errorf("a runtime key with --max-output 4: got %s (%v), want 4 tokens", lengthOf(resp), e)
	}
	if _, e := maxOutputChat(g, k.Secret, "free", 5); e == nil || e.StatusCode != 400 || !strings.Contains(e.Message, "set for your key runner") {
		t.Errorf("a runtime key asking 5 over its 4: got %+v, want 400 naming the key", e)
	}
}

// lengthOf describes an answer's length for a failure message.
func lengthOf(resp *openai.ChatCompletion) string {
	if resp == nil || len(resp.Choices) == 0 {
		return "no answer"
	}
	return fmt.Sprintf("%d completion tokens, finish_reason %s", resp.Usage.CompletionTokens, resp.Choices[0].FinishReason)
}

// maxOutputPost posts body to path with k2's secret in header
// (Authorization as a bearer token, or x-api-key as Anthropic's clients
// send it) and returns the status and the body.
func maxOutputPost(t *testing.T, g *gateway, path, header, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if header == "Authorization" {
		req.Header.Set(header, "Bearer secret-2")
	} else {
		req.Header.Set(header, "secret-2")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// ctlRowHas says whether a table row that starts with first has a
// column equal to value.
func ctlRowHas(table, first, value string) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == first {
			for _, c := range f[1:] {
				if c == value {
					return true
				}
			}
		}
	}
	return false
}

// TestMaxOutputProvider: an outside provider (a stand-in server) gets a
// model's max_output as the length of a request that asked none: in chat
// completions as max_tokens, and in a Responses request that goes to it
// in the client's own bytes as max_output_tokens; a request that asked
// for its own length within the limit reaches it unchanged.
func TestMaxOutputProvider(t *testing.T) {
	prov, url := startProvider(t)
	g := startGateway(t, `
		model gpt {
			engine openai
			option base_url `+url+`/v1
			option api_key sk-test
			option speaks responses
			max_output 100
		}`, "")
	for _, tc := range []struct {
		name, path, body, wantURL, wantSent string
	}{
		{"chat asking nothing", "/v1/chat/completions", `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`, "/v1/chat/completions", `"max_tokens":100`},
		{"chat asking less", "/v1/chat/completions", `{"model":"gpt","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, "/v1/chat/completions", `"max_tokens":20`},
		{"responses asking nothing", "/v1/responses", `{"model":"gpt","store":false,"input":"hi"}`, "/v1/responses", `"max_output_tokens":100`},
		{"responses asking less", "/v1/responses", `{"model":"gpt","store":false,"max_output_tokens":30,"input":"hi"}`, "/v1/responses", `"max_output_tokens":30`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, g.base+tc.path, tc.body)
			sent := prov.Last()
			if resp.StatusCode != 200 || !strings.HasSuffix(sent.URL, tc.wantURL) || !strings.Contains(string(sent.Body), tc.wantSent) {
				t.Errorf("status %d (%.200s); the provider got %s %s, want %s with %s", resp.StatusCode, body, sent.URL, sent.Body, tc.wantURL, tc.wantSent)
			}
		})
	}
}
