package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestKnowledgeBasePassagesGuardedAndCached puts a document holding an
// email address and a phone number in a store and asks the echo model
// with the knowledge header, through llm_kb, llm_guardrails and llm_cache:
// the engine never sees the passage's personal data (the guardrails
// redact the passages as they do prompts, and restore what the answer
// repeats); the same question again is answered from the cache; once the
// store changes, it is not.
func TestKnowledgeBasePassagesGuardedAndCached(t *testing.T) {
	before := "\t\tllm_kb\n" + guardBlock + "\n\t\tllm_cache\n"
	g := startGatewayBefore(t, guardModels, before)
	g.waitReady()
	c := g.client()
	contacts := []byte("# Support contacts\n\nThe data protection officer is Ana Lima, reachable at dpo.lima@example.com or +44 20 7946 0123.\n")
	f := kbUpload(t, c, "contacts.md", contacts)
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{Name: openai.String("contacts"), FileIDs: []string{f.ID}})
	if err != nil {
		t.Fatal(err)
	}
	kbWaitStore(t, c, vs.ID)

	const question = "Who is the data protection officer? Is dpo.lima@example.com right?"
	answer, cache := kbAsk(t, g, vs.ID, question)
	if !strings.Contains(answer, "dpo.lima@example.com") {
		t.Errorf("the answer lost the address the question gave (not restored): %q", answer)
	}
	seen := lastSeen(t, g)
	if !strings.Contains(seen, "Ana Lima") {
		t.Fatalf("the engine did not get the passage: %s", seen)
	}
	for _, secret := range []string{"dpo.lima@example.com", "7946 0123"} {
		if strings.Contains(seen, secret) {
			t.Errorf("the engine saw the passage's %q: %s", secret, seen)
		}
	}
	if cache != "miss" {
		t.Errorf("the first question: cache %q, want miss", cache)
	}
	if _, cache = kbAsk(t, g, vs.ID, question); cache != "hit-exact" {
		t.Errorf("the same question again: cache %q, want hit-exact", cache)
	}
	more := kbUpload(t, c, "contacts-2026.md", []byte("# Support contacts 2026\n\nFrom 2026 the data protection officer is Ben Okafor.\n"))
	if _, err := c.VectorStores.Files.New(bg, vs.ID, openai.VectorStoreFileNewParams{FileID: more.ID}); err != nil {
		t.Fatal(err)
	}
	kbWaitStore(t, c, vs.ID)
	if _, cache = kbAsk(t, g, vs.ID, question); cache != "miss" {
		t.Errorf("the same question after the store changed: cache %q, want miss (an answer from before the change)", cache)
	}
}

// kbAsk asks the echo model with the knowledge header and returns the
// answer and the cache's outcome.
func kbAsk(t *testing.T, g *gateway, store, q string) (string, string) {
	t.Helper()
	body := `{"model":"echo","messages":[{"role":"user","content":` + jsonString(q) + `}]}`
	req, _ := http.NewRequest("POST", g.base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-LLMGW-Knowledge", store)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("asking: %d %s", resp.StatusCode, b)
	}
	var buf bytes.Buffer
	buf.Write(b)
	return between(buf.String(), `"content":"`, `"`), resp.Header.Get("X-Llmgw-Cache")
}

func jsonString(s string) string {
	return `"` + strings.NewReplacer(`"`, `\"`, `\`, `\\`).Replace(s) + `"`
}
