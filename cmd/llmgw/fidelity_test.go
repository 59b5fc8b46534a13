package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// fidelityModels: a sim chat model that answers at length.
const fidelityModels = `
		model sim-chat {
			engine sim
			option max_tokens 64
			context_length 4096
		}`

// weatherSchema is the schema a structured answer must fit.
var weatherSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city":    map[string]any{"type": "string"},
		"degrees": map[string]any{"type": "integer"},
		"sky":     map[string]any{"type": "string", "enum": []any{"sunny", "cloudy", "rain"}},
	},
	"required":             []any{"city", "degrees", "sky"},
	"additionalProperties": false,
}

// fitsWeather checks that text is JSON of weatherSchema.
func fitsWeather(t *testing.T, text string) {
	t.Helper()
	var v struct {
		City    *string
		Degrees *int
		Sky     *string
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("the answer %q is not JSON of the schema: %v", text, err)
	}
	if v.City == nil || v.Degrees == nil || v.Sky == nil {
		t.Fatalf("the answer %q lacks a required member", text)
	}
	if s := *v.Sky; s != "sunny" && s != "cloudy" && s != "rain" {
		t.Errorf("the answer's sky %q is not one of the enum", s)
	}
}

// Anthropic's structured outputs through the gateway: output_config.format
// (and the older beta output_format) make the answer's text JSON that fits
// the schema, whole and streamed, as messages.parse and generateObject
// expect.
func TestMessagesStructuredOutput(t *testing.T) {
	g := startGateway(t, fidelityModels, "")
	c := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model: "sim-chat", MaxTokens: 256,
		Messages:     []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("the weather in Paris"))},
		OutputConfig: anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: weatherSchema}},
	}

	t.Run("output_config", func(t *testing.T) {
		msg, err := c.Messages.New(bg, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("got %s", msg.RawJSON())
		}
		fitsWeather(t, msg.Content[0].Text)
	})

	t.Run("streamed", func(t *testing.T) {
		msg := accumulateMessage(t, c.Messages.NewStreaming(bg, params))
		if len(msg.Content) != 1 {
			t.Fatalf("got %s", msg.RawJSON())
		}
		fitsWeather(t, msg.Content[0].Text)
	})

	t.Run("beta output_format", func(t *testing.T) {
		msg, err := c.Beta.Messages.New(bg, anthropic.BetaMessageNewParams{
			Model: "sim-chat", MaxTokens: 256,
			Messages:     []anthropic.BetaMessageParam{anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("the weather in Oslo"))},
			OutputFormat: anthropic.BetaJSONOutputFormatParam{Schema: weatherSchema},
			Betas:        []anthropic.AnthropicBeta{"structured-outputs-2025-11-13"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 {
			t.Fatalf("got %s", msg.RawJSON())
		}
		fitsWeather(t, msg.Content[0].Text)
	})

	t.Run("bad format", func(t *testing.T) {
		resp, body := post(t, g.base+"/v1/messages", `{"model":"sim-chat","max_tokens":50,"messages":[{"role":"user","content":"x"}],"output_config":{"format":{"type":"json_schema"}}}`)
		if resp.StatusCode != 400 || !bytes.Contains(body, []byte(`"type":"invalid_request_error"`)) || !bytes.Contains(body, []byte("output_config.format.schema")) {
			t.Errorf("status %d: %s", resp.StatusCode, body)
		}
	})
}

// A stop sequence the engine names (vLLM's stop_reason, as the sim gives
// it) reaches a Messages client as stop_reason stop_sequence with the
// sequence, whole and streamed; the earliest of several ends the answer.
func TestMessagesStopSequence(t *testing.T) {
	g := startGateway(t, fidelityModels, "")
	c := anthropic.NewClient(aoption.WithBaseURL(g.base), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0))
	params := anthropic.MessageNewParams{
		Model: "sim-chat", MaxTokens: 20,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("tell me about rivers"))},
	}
	plain, err := c.Messages.New(bg, params)
	if err != nil {
		t.Fatal(err)
	}
	text := plain.Content[0].Text
	words := strings.Fields(text)
	early, late := " "+words[3], " "+words[8]
	if i := strings.Index(text, late); i < strings.Index(text, early) {
		early, late = late, early
	}
	want := text[:strings.Index(text, early)]
	params.StopSequences = []string{late, early} // the later one listed first

	msg, err := c.Messages.New(bg, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != want || msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != early {
		t.Errorf("got %q, stop_reason %q, stop_sequence %q; want %q, stop_sequence, %q", msg.Content[0].Text, msg.StopReason, msg.StopSequence, want, early)
	}

	acc := accumulateMessage(t, c.Messages.NewStreaming(bg, params))
	if acc.Content[0].Text != want || acc.StopReason != anthropic.StopReasonStopSequence || acc.StopSequence != early {
		t.Errorf("streamed: got %q, stop_reason %q, stop_sequence %q", acc.Content[0].Text, acc.StopReason, acc.StopSequence)
	}
}

// postAs posts body to url with a Content-Type.
func postAs(t *testing.T, url, contentType, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// Requests an attacker or a confused client sends are refused by the
// gateway, before any engine, with a status and a message that say why
// and what to send instead, in the API's own error shape.
func TestRequestChecks(t *testing.T) {
	g := startGateway(t, fidelityModels, "")
	openaiShape, anthropicShape := `{"error":{"message":`, `{"type":"error","error":{"type":"invalid_request_error"`
	for _, tc := range []struct {
		name, path, ct, body string
		status               int
		shape, says          string
	}{
		{"form to chat", "/v1/chat/completions", "application/x-www-form-urlencoded", `model=sim-chat&messages=hi`, 415, openaiShape, "application/json"},
		{"text to completions", "/v1/completions", "text/plain", `{"model":"sim-chat","prompt":"hi"}`, 415, openaiShape, "application/json"},
		{"multipart to embeddings", "/v1/embeddings", "multipart/form-data; boundary=b", "--b\r\n", 415, openaiShape, "application/json"},
		{"xml to responses", "/v1/responses", "application/xml", `<input/>`, 415, openaiShape, "application/json"},
		{"text to messages", "/v1/messages", "text/plain", `{"model":"sim-chat","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, 415, anthropicShape, "application/json"},
		{"latin-1 to chat", "/v1/chat/completions", "application/json", `{"model":"sim-chat","messages":[{"role":"user","content":"caf` + "\xe9" + `"}]}`, 400, openaiShape, "not valid UTF-8"},
		{"latin-1 to messages", "/v1/messages", "application/json", `{"model":"sim-chat","max_tokens":5,"messages":[{"role":"user","content":"caf` + "\xe9" + `"}]}`, 400, anthropicShape, "not valid UTF-8"},
		{"file image to chat", "/v1/chat/completions", "application/json",
			`{"model":"sim-chat","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"file:///etc/passwd"}}]}]}`, 400, openaiShape, "messages[0].content[0].image_url.url must be an http(s) URL or a data: URL, not a file: URL"},
		{"file image to responses", "/v1/responses", "application/json",
			`{"model":"sim-chat","input":[{"role":"user","content":[{"type":"input_image","image_url":"file:///etc/passwd"}]}]}`, 400, openaiShape, "input[0].content[0].image_url must be an http(s) URL or a data: URL"},
		{"file image to messages", "/v1/messages", "application/json",
			`{"model":"sim-chat","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`, 400, anthropicShape, "messages[0].content[0].source.url must be an http(s) URL or a data: URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := postAs(t, g.base+tc.path, tc.ct, tc.body)
			if resp.StatusCode != tc.status || !bytes.HasPrefix(body, []byte(tc.shape)) || !bytes.Contains(body, []byte(tc.says)) {
				t.Errorf("got %d %s; want %d saying %q", resp.StatusCode, body, tc.status, tc.says)
			}
			if r := resp.Header.Get("X-Llm-Replica"); strings.HasPrefix(r, "sim-chat") {
				t.Errorf("the request reached replica %s", r)
			}
		})
	}

	t.Run("decode errors speak the API", func(t *testing.T) {
		for _, body := range []string{
			`{"model":"sim-chat","seed":"x","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"sim-chat","response_format":{"type":5},"messages":[{"role":"user","content":"hi"}]}`, // checked by the engine
		} {
			resp, got := post(t, g.base+"/v1/chat/completions", body)
			if resp.StatusCode != 400 || bytes.Contains(got, []byte("Go struct")) || bytes.Contains(got, []byte("json: ")) ||
				!bytes.Contains(got, []byte("must be")) {
				t.Errorf("%s: got %d %s", body, resp.StatusCode, got)
			}
		}
	})
}

// cachedPair posts body twice and returns both answers, checking that the
// first missed the cache and the second hit it.
func cachedPair(t *testing.T, g *gateway, path, body string) ([]byte, []byte) {
	t.Helper()
	var out [2][]byte
	for i, want := range []string{"miss", "hit-exact"} {
		resp, b := post(t, g.base+path, body)
		if resp.StatusCode != 200 || resp.Header.Get("X-Llmgw-Cache") != want {
			t.Fatalf("%s #%d: status %d, x-llmgw-cache %q, want %s: %s", path, i+1, resp.StatusCode, resp.Header.Get("X-Llmgw-Cache"), want, b)
		}
		out[i] = b
	}
	return out[0], out[1]
}

// pick reads the members at paths of a JSON answer.
func pick(t *testing.T, body []byte, paths ...string) map[string]any {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	out := map[string]any{}
	for _, p := range paths {
		cur := v
		for _, k := range strings.Split(p, ".") {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[k]
			case []any:
				i, _ := strconv.Atoi(k)
				cur = nil
				if i < len(c) {
					cur = c[i]
				}
			}
		}
		out[p] = cur
	}
	return out
}

// streamed joins a chat stream's reasoning, content, logprobs tokens, and
// reads its finish chunk's stop_reason and its usage.
func streamed(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var reasoning, content, tokens strings.Builder
	out := map[string]any{}
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content   string
					Reasoning string `json:"reasoning_content"`
				}
				Logprobs *struct {
					Content []struct {
						Token   string
						Logprob float64
					}
				}
				Finish     *string `json:"finish_reason"`
				StopReason any     `json:"stop_reason"`
			}
			Usage map[string]any
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		if ch.Usage != nil {
			out["usage"] = ch.Usage
		}
		for _, c := range ch.Choices {
			reasoning.WriteString(c.Delta.Reasoning)
			content.WriteString(c.Delta.Content)
			if c.Logprobs != nil {
				for _, e := range c.Logprobs.Content {
					fmt.Fprintf(&tokens, "%s(%.4f)", e.Token, e.Logprob)
				}
			}
			if c.Finish != nil {
				out["finish"], out["stop_reason"] = *c.Finish, c.StopReason
			}
		}
	}
	out["reasoning"], out["content"], out["logprobs"] = reasoning.String(), content.String(), tokens.String()
	return out
}

// A cache hit gives what the miss gave: reasoning, its token count,
// logprobs and the stop sequence that ended the answer, in chat
// completions (whole and streamed), Messages (thinking blocks,
// stop_sequence) and Responses (reasoning items, reasoning_tokens).
func TestCacheHitKeepsDetails(t *testing.T) {
	g := startGatewayBefore(t, `
		model sim-think {
			engine sim
			option reasoning true
			option max_tokens 16
		}`, "\t\tllm_cache {\n\t\t\tttl 1m\n\t\t}")
	// stopFor is a stop sequence the answer to q has (the sim answers a
	// question the same way each time).
	stopFor := func(q string) []byte {
		_, probe := post(t, g.base+"/v1/chat/completions", `{"model":"sim-think","max_tokens":16,"messages":[{"role":"user","content":"`+q+`"}]}`)
		words := strings.Fields(pick(t, probe, "choices.0.message.content")["choices.0.message.content"].(string))
		stop, _ := json.Marshal(" " + words[4])
		return stop
	}
	chat := func(q string, stream bool) string {
		return fmt.Sprintf(`{"model":"sim-think","max_tokens":16,"logprobs":true,"top_logprobs":2,"stop":[%s],"stream":%v,"stream_options":%s,"messages":[{"role":"user","content":%q}]}`,
			stopFor(q), stream, map[bool]string{true: `{"include_usage":true}`, false: "null"}[stream], q)
	}

	t.Run("chat", func(t *testing.T) {
		paths := []string{"choices.0.message.reasoning_content", "choices.0.message.content", "choices.0.logprobs", "choices.0.stop_reason",
			"choices.0.finish_reason", "usage.completion_tokens", "usage.completion_tokens_details.reasoning_tokens"}
		miss, hit := cachedPair(t, g, "/v1/chat/completions", chat("rivers", false))
		m, h := pick(t, miss, paths...), pick(t, hit, paths...)
		if m["choices.0.logprobs"] == nil || m["choices.0.stop_reason"] == nil || m["choices.0.message.reasoning_content"] == nil {
			t.Fatalf("the miss lacks what the test needs: %s", miss)
		}
		if diff := cmp.Diff(m, h); diff != "" {
			t.Errorf("the hit differs from the miss (-miss +hit)\n%s", diff)
		}
	})
	t.Run("chat streamed", func(t *testing.T) {
		miss, hit := cachedPair(t, g, "/v1/chat/completions", chat("lakes", true))
		m, h := streamed(t, miss), streamed(t, hit)
		delete(m["usage"].(map[string]any), "prompt_tokens_details") // the hit marks the prompt cached
		delete(h["usage"].(map[string]any), "prompt_tokens_details")
		if m["logprobs"] == "" || m["stop_reason"] == nil || m["reasoning"] == "" {
			t.Fatalf("the miss lacks what the test needs: %v", m)
		}
		if diff := cmp.Diff(m, h); diff != "" {
			t.Errorf("the hit differs from the miss (-miss +hit)\n%s", diff)
		}
	})
	t.Run("messages", func(t *testing.T) {
		body := fmt.Sprintf(`{"model":"sim-think","max_tokens":16,"stop_sequences":[%s],"messages":[{"role":"user","content":"seas"}]}`, stopFor("seas"))
		paths := []string{"content", "stop_reason", "stop_sequence", "usage.output_tokens"}
		miss, hit := cachedPair(t, g, "/v1/messages", body)
		m, h := pick(t, miss, paths...), pick(t, hit, paths...)
		if !strings.Contains(string(miss), `"type":"thinking"`) || m["stop_reason"] != "stop_sequence" {
			t.Fatalf("the miss lacks what the test needs: %s", miss)
		}
		for _, v := range []map[string]any{m, h} { // signatures are made per answer
			for _, b := range v["content"].([]any) {
				delete(b.(map[string]any), "signature")
			}
		}
		if diff := cmp.Diff(m, h); diff != "" {
			t.Errorf("the hit differs from the miss (-miss +hit)\n%s", diff)
		}
	})
	t.Run("responses", func(t *testing.T) {
		body := `{"model":"sim-think","max_output_tokens":16,"store":false,"input":"oceans"}`
		paths := []string{"output.0.type", "output.0.content", "output.0.summary", "output.1.content.0.text", "status",
			"usage.output_tokens", "usage.output_tokens_details.reasoning_tokens"}
		miss, hit := cachedPair(t, g, "/v1/responses", body)
		m, h := pick(t, miss, paths...), pick(t, hit, paths...)
		if m["output.0.type"] != "reasoning" {
			t.Fatalf("the miss lacks what the test needs: %s", miss)
		}
		if diff := cmp.Diff(m, h); diff != "" {
			t.Errorf("the hit differs from the miss (-miss +hit)\n%s", diff)
		}
	})
}
