package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The echo model answers with the last message's text in 3-byte pieces,
// so every placeholder it repeats is split across stream chunks.
const guardModels = `
		model echo {
			engine sim
			option echo true
			min 1
		}`

const guardBlock = `		llm_guardrails {
			lookahead 16
			pii {
				email
				card
				phone
				secret block
			}
			regex topics {
				deny zeus "(?i)project\s+zeus"
				on input
			}
			regex leaks {
				deny launch_codes "(?i)launch\s+codes"
				on output
			}
		}`

// lastSeen is the body the echo replica received last.
func lastSeen(t *testing.T, g *gateway) string {
	t.Helper()
	rep := g.readyReplicas("echo", 1)[0]
	resp, err := http.Get(strings.TrimSuffix(rep.URL, "/v1") + "/sim/last")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestGuardrailsRedactAndRestore(t *testing.T) {
	g := startGatewayBefore(t, guardModels, guardBlock)
	c := g.client()
	const prompt = "Write to ana@example.com or call +44 20 7946 0958; my card is 4111 1111 1111 1111. Ana again: ana@example.com"

	var raw *http.Response
	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != prompt {
		t.Errorf("whole answer:\n got %q\nwant %q", got, prompt)
	}
	seen := lastSeen(t, g)
	for _, secret := range []string{"ana@example.com", "4111 1111 1111 1111", "7946 0958"} {
		if strings.Contains(seen, secret) {
			t.Errorf("the engine saw %q: %s", secret, seen)
		}
	}
	for _, ph := range []string{"<EMAIL_1>", "<CARD_1>", "<PHONE_1>"} {
		if !strings.Contains(seen, ph) && !strings.Contains(seen, strings.NewReplacer("<", `\u003c`, ">", `\u003e`).Replace(ph)) {
			t.Errorf("the engine did not get %s: %s", ph, seen)
		}
	}
	if strings.Count(seen, "EMAIL_") != 2 || strings.Contains(seen, "EMAIL_2") {
		t.Errorf("the same email should be the same placeholder twice: %s", seen)
	}
	if st := raw.Header.Get("Server-Timing"); !strings.Contains(st, "guard;dur=") {
		t.Errorf("Server-Timing %q has no guard entry", st)
	}

	// Streamed: every placeholder arrives cut in pieces; the client gets
	// the originals and never a placeholder.
	stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	})
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 && strings.ContainsAny(ch.Choices[0].Delta.Content, "<>") {
			t.Errorf("a chunk carries part of a placeholder: %q", ch.Choices[0].Delta.Content)
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Choices[0].Message.Content; got != prompt {
		t.Errorf("streamed answer:\n got %q\nwant %q", got, prompt)
	}
	if chunks < 20 {
		t.Errorf("only %d chunks: the stream was buffered", chunks)
	}

	// Text completions too.
	comp, err := c.Completions.New(bg, openai.CompletionNewParams{
		Model:  "echo",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if comp.Choices[0].Text != prompt {
		t.Errorf("completion: got %q", comp.Choices[0].Text)
	}

	fams := scrape(t, g)
	if v, _ := value(fams, "llmgw_guardrail_checks_total", map[string]string{"check": "pii", "stage": "input", "outcome": "redacted"}); v < 3 {
		t.Errorf("pii/input redacted counted %v times, want 3", v)
	}
	if v, _ := value(fams, "llmgw_guardrail_findings_total", map[string]string{"check": "pii", "kind": "CARD", "action": "redact"}); v < 3 {
		t.Errorf("CARD findings counted %v times, want 3", v)
	}
	if !strings.Contains(g.logs.String(), `"llm_guard":"pii/input:redacted`) {
		t.Errorf("access log has no llm_guard field:\n%s", lastLines(g.logs.String(), 5))
	}
	if strings.Contains(g.logs.String(), "ana@example.com") {
		t.Error("the logs hold the prompt's email address")
	}
}

func TestGuardrailsBlock(t *testing.T) {
	g := startGatewayBefore(t, guardModels, guardBlock)
	c := g.client()

	// A blocked prompt never reaches the engine.
	before := lastSeen(t, g)
	_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("tell me all about Project  Zeus")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Code != "guardrail_blocked" || !strings.Contains(apiErr.Message, `"topics"`) {
		t.Fatalf("blocked prompt: %v", err)
	}
	if lastSeen(t, g) != before {
		t.Error("the engine got the blocked prompt")
	}
	// A secret in the prompt: the pii check's secret detector blocks.
	_, err = c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("my key is AKIA" + "IOSFODNN7EXAMPLE")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "secret") {
		t.Fatalf("secret in the prompt: %v", err)
	}

	// An answer that matches an output check mid-stream: the client gets
	// the text before the match, then an error event naming the check,
	// and nothing after (with a lookahead of 16 bytes, nothing of the
	// match either).
	stream := c.Chat.Completions.NewStreaming(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("the weather is fine; the launch codes are 0000; and more text after it")},
	})
	var text strings.Builder
	for stream.Next() {
		if ch := stream.Current(); len(ch.Choices) > 0 {
			text.WriteString(ch.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err == nil || !strings.Contains(err.Error(), `guardrail \"leaks\"`) {
		t.Errorf("stream error: %v", err)
	}
	if got := text.String(); got != "the weather is fine; the " {
		t.Errorf("the client got %q, want the text up to the match and nothing of it", got)
	}

	// The same answer whole: a 400 naming the check.
	_, err = c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("the launch codes are 0000")},
	})
	if !errors.As(err, &apiErr) || apiErr.Code != "guardrail_blocked" || !strings.Contains(apiErr.Message, `"leaks"`) {
		t.Fatalf("blocked answer: %v", err)
	}
	fams := scrape(t, g)
	if v, _ := value(fams, "llmgw_guardrail_checks_total", map[string]string{"check": "leaks", "stage": "output", "outcome": "blocked"}); v != 2 {
		t.Errorf("leaks/output blocked counted %v times, want 2", v)
	}
}

// The judge asks a catalog guard model. The echo model stands in for one:
// it repeats the prompt, so a prompt that reads "unsafe\nS1" gets that
// verdict, and any other prompt an unreadable one.
func TestGuardrailsJudgeCatalogModel(t *testing.T) {
	models := guardModels + `
		model guard {
			engine sim
			option echo true
		}`
	block := `		llm_guardrails {
			judge strict {
				model guard
				on_error deny
				models echo
			}
		}`
	g := startGatewayBefore(t, models, block)
	c := g.client()
	_, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("unsafe\nS1,S10")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "S1, S10") {
		t.Fatalf("unsafe verdict: %v", err)
	}
	resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("safe")},
	})
	if err != nil || resp.Choices[0].Message.Content != "safe" {
		t.Fatalf("safe verdict: %v", err)
	}
	_, err = c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "echo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 503 || apiErr.Code != "guardrail_unavailable" {
		t.Fatalf("unreadable verdict with on_error deny: %v", err)
	}
	// The guard model itself is not judged (models echo).
	resp, err = c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{
		Model:    "guard",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")},
	})
	if err != nil {
		t.Fatalf("the guard model: %v", err)
	}
	fams := scrape(t, g)
	if v, _ := value(fams, "llmgw_guardrail_checks_total", map[string]string{"check": "strict", "stage": "input", "outcome": "skipped"}); v != 1 {
		t.Errorf("skipped counted %v times, want 1", v)
	}
	var line map[string]any
	for _, l := range strings.Split(g.logs.String(), "\n") {
		if strings.Contains(l, `"llm_guard"`) && strings.Contains(l, "skipped") {
			_ = json.Unmarshal([]byte(l[strings.IndexByte(l, '{'):]), &line)
		}
	}
	if s, _ := line["llm_guard"].(string); !strings.Contains(s, "strict/input:skipped(model guard not in its models)") {
		t.Errorf("access log llm_guard = %q", s)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
