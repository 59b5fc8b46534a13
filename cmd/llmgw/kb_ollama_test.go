package main

import (
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// TestKnowledgeBaseOllamaEmbedder embeds a store's chunks and queries
// with a real engine: the tiny test model served by Ollama. Its vectors
// mean nothing (random weights), so this checks the plumbing: every
// chunk is embedded through Ollama's /v1/embeddings in batches and
// stored with its vector, searches embed the question (no fallback to
// keywords alone), and the keyword half still finds the right file.
func TestKnowledgeBaseOllamaEmbedder(t *testing.T) {
	src := tinyModel(t)
	models := kbModels + ollamaModels(t, `model tiny {
			engine ollama
			source `+src+`
			context_length 512
			min 1
		}`)
	g := startGatewayBefore(t, models, "\t\tllm_kb {\n\t\t\tembedder tiny\n\t\t}\n")
	g.readyReplicas("tiny", 1)
	c := g.client()
	var ids []string
	for _, name := range []string{"travel-policy.md", "security.html", "onboarding.txt"} {
		ids = append(ids, kbUpload(t, c, name, nil).ID)
	}
	vs, err := c.VectorStores.New(bg, openai.VectorStoreNewParams{FileIDs: ids, ChunkingStrategy: openai.FileChunkingStrategyParamUnion{
		OfStatic: &openai.StaticFileChunkingStrategyObjectParam{Static: openai.StaticFileChunkingStrategyParam{MaxChunkSizeTokens: 120, ChunkOverlapTokens: 20}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := kbWaitStore(t, c, vs.ID)
	if got.FileCounts.Completed != 3 {
		page, _ := c.VectorStores.Files.List(bg, vs.ID, openai.VectorStoreFileListParams{})
		t.Fatalf("the files embedded by Ollama: %+v %+v", got.FileCounts, page)
	}
	// usage_bytes counts 4 bytes per vector element beside the text.
	text := 0
	for _, id := range ids {
		content, err := c.VectorStores.Files.Content(bg, vs.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range content.Data {
			text += len(p.Text)
		}
	}
	if got.UsageBytes <= int64(text) {
		t.Errorf("usage_bytes %d for %d bytes of text: the chunks have no vectors", got.UsageBytes, text)
	}
	names, _ := kbSearch(t, c, vs.ID, "how many characters must a password have", nil)
	if len(names) == 0 || names[0] != "security.html" {
		t.Errorf("hybrid search with Ollama's vectors: %v", names)
	}
	if strings.Contains(g.logs.String(), "embedding a query") {
		t.Errorf("a query was not embedded:\n%s", g.logs.String())
	}
}
