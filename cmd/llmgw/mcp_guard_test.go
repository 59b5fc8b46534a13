package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// Tool calls through llm_mcp with llm_quota and llm_guardrails in front:
// a key's tool calls are limited per minute; a tool result's email
// address and phone number reach the client as placeholders, a later
// call's arguments get the value back (the tool sees a real address), a
// chat answer that repeats the placeholder gives the client the value,
// and a blocked argument refuses the call.
func TestMCPToolCallQuotaAndGuardrails(t *testing.T) {
	remote := startMCPUpstream(t, "remote")
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{})}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		model echo {
			engine sim
			option echo true
		}
		org acme {
			team research {
				project alpha {
					key k1 %s {
						tools remote.*
					}
					key k2 %s {
						tools remote.add
						tool_calls_per_minute 3
					}
				}
			}
		}
	}
}

:%d {
	log
	route /v1/* {
		llm_quota
		llm_guardrails {
			pii
		}
		llm_router
	}
	route /mcp* {
		llm_quota
		llm_guardrails {
			pii
			regex no-drops {
				deny sql "(?i)drop\s+table"
			}
		}
		llm_mcp {
			server remote {
				url %s
			}
		}
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), tenancy.HashKey("secret-2"), g.http, remote)
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	k1 := mcpClient(t, g.base+"/mcp", "secret-1", false, nil)
	k2 := mcpClient(t, g.base+"/mcp", "secret-2", false, nil)
	waitFor(t, 20*time.Second, "the remote tools", func() bool { return len(toolNames(t, k1)) > 5 })

	t.Run("tool result redacted", func(t *testing.T) {
		out, isErr, err := callText(k1, "remote__contact", map[string]any{})
		if err != nil || isErr {
			t.Fatalf("remote__contact: %v %v", err, isErr)
		}
		if strings.Contains(out, "ada.lovelace@example.com") || strings.Contains(out, "555 0134") ||
			!strings.Contains(out, "<EMAIL_T1>") || !strings.Contains(out, "<PHONE_T1>") {
			t.Fatalf("the client got %q; want the email address and phone number as placeholders", out)
		}
	})
	t.Run("arguments restored for the tool", func(t *testing.T) {
		out, _, err := callText(k1, "remote__mailcheck", map[string]any{"text": "<EMAIL_T1>"})
		if err != nil || out != "deliverable, domain example.com" {
			t.Fatalf("remote__mailcheck of the placeholder = %q (%v); want the tool to get the real address", out, err)
		}
		// The echo of the value comes back as the same placeholder.
		out, _, err = callText(k1, "remote__echo", map[string]any{"text": "mail <EMAIL_T1> now"})
		if err != nil || out != "mail <EMAIL_T1> now" {
			t.Fatalf("remote__echo = %q (%v)", out, err)
		}
		// Another key's placeholder means nothing.
		c2 := mcpClient(t, g.base+"/mcp", "secret-1", false, nil) // same key, new session: same vault
		if out, _, _ := callText(c2, "remote__mailcheck", map[string]any{"text": "<EMAIL_T1>"}); out != "deliverable, domain example.com" {
			t.Errorf("a new session of the same key: mailcheck = %q", out)
		}
	})
	t.Run("chat answer restores the placeholder", func(t *testing.T) {
		c := openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey("secret-1"))
		resp, err := c.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "echo",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write to <EMAIL_T1> about the renewal")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; got != "Write to ada.lovelace@example.com about the renewal" {
			t.Fatalf("the chat answer is %q; want the tool result's value back", got)
		}
		c2 := openai.NewClient(option.WithBaseURL(g.base+"/v1"), option.WithAPIKey("secret-2"))
		resp, err = c2.Chat.Completions.New(bg, openai.ChatCompletionNewParams{Model: "echo",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Write to <EMAIL_T1>")}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Choices[0].Message.Content; strings.Contains(got, "ada.lovelace") {
			t.Fatalf("another key's chat answer got the value: %q", got)
		}
	})
	t.Run("blocked argument", func(t *testing.T) {
		_, _, err := callText(k1, "remote__echo", map[string]any{"text": "please DROP TABLE customers"})
		if err == nil || !strings.Contains(err.Error(), "no-drops") {
			t.Fatalf("a call with a denied argument: %v; want a refusal naming the guardrail", err)
		}
	})
	t.Run("tool calls per minute", func(t *testing.T) {
		for i := range 3 {
			if out, _, err := callText(k2, "remote__add", map[string]any{"a": i, "b": 1}); err != nil || out != fmt.Sprint(i+1) {
				t.Fatalf("call %d: %q %v", i+1, out, err)
			}
		}
		_, _, err := callText(k2, "remote__add", map[string]any{"a": 1, "b": 1})
		if err == nil || !strings.Contains(err.Error(), "3 tool calls per minute") {
			t.Fatalf("the 4th call in a minute: %v; want a refusal naming the limit", err)
		}
		// tools/list is not a tool call: it still works.
		if names := toolNames(t, k2); len(names) != 1 {
			t.Errorf("k2 lists %v", names)
		}
	})
	if !strings.Contains(g.logs.String(), `"llm_guard":"pii/output:redacted`) {
		t.Errorf("no access-log line records the redaction of a tool result")
	}
}
