package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
)

// modelClient reaches replicas for modules that use a catalog model
// themselves (the cache's embedder, a guard model).
var modelClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}

// Embeddings asks a catalog model (by name or alias) for the embeddings
// of texts, through one of its replicas chosen as the router would.
func (a *App) Embeddings(ctx context.Context, model string, texts []string) ([][]float32, error) {
	vecs, _, err := a.EmbeddingsUsage(ctx, model, texts)
	return vecs, err
}

// EmbeddingsUsage is Embeddings that also returns the prompt tokens the
// model reports having used (its usage.prompt_tokens; 0 when it reports
// none), for modules that charge them to a tenant (see Charge).
func (a *App) EmbeddingsUsage(ctx context.Context, model string, texts []string) ([][]float32, int64, error) {
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := a.call(ctx, model, "/embeddings", map[string]any{"input": texts}, &out); err != nil {
		return nil, 0, fmt.Errorf("embedding with %q: %w", model, err)
	}
	vecs := make([][]float32, len(texts))
	for _, d := range out.Data {
		if d.Index >= 0 && d.Index < len(vecs) {
			vecs[d.Index] = d.Embedding
		}
	}
	for i, v := range vecs {
		if v == nil {
			return nil, 0, fmt.Errorf("embedding with %q: no vector for input %d", model, i)
		}
	}
	return vecs, max(out.Usage.PromptTokens, 0), nil
}

// Slots reports a catalog model's free and total request slots on its
// ready replicas (see fleet.Fleet.Slots): background work such as a
// knowledge base's import paces itself by them so that interactive
// requests to the same model keep their replicas. A model without a
// ready replica has none of either.
func (a *App) Slots(model string) (free, total int) {
	m, err := a.Lookup(model)
	if err != nil {
		return 0, 0
	}
	f, ok := a.v().fleets[m.Name]
	if !ok {
		return 0, 0
	}
	return f.Slots()
}

// ChatMessage is one message of a Chat call.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Chat asks a catalog model for a short answer (temperature 0), through
// one of its replicas chosen as the router would: for modules that use a
// model themselves, such as a guard model.
func (a *App) Chat(ctx context.Context, model string, messages []ChatMessage, maxTokens int) (string, error) {
	var out openai.ChatAnswer
	body := map[string]any{"messages": messages, "max_tokens": maxTokens, "temperature": 0}
	if err := a.call(ctx, model, "/chat/completions", body, &out); err != nil {
		return "", fmt.Errorf("asking %q: %w", model, err)
	}
	text, err := out.Content()
	if err != nil {
		return "", fmt.Errorf("asking %q: %w", model, err)
	}
	return text, nil
}

// call posts body (with the replica's model name added) to one of a
// model's replicas and decodes the JSON answer into out.
func (a *App) call(ctx context.Context, model, path string, body map[string]any, out any) error {
	m, err := a.Lookup(model)
	if err != nil {
		return err
	}
	rep, release, err := a.Acquire(ctx, m.Name, fleet.LeastOutstanding{})
	if err != nil {
		return err
	}
	defer release()
	body["model"] = m.Name
	if rep.UpstreamModel != "" {
		body["model"] = rep.UpstreamModel
	}
	if mem := rep.AdapterMembers(m.Name); mem != nil {
		if err := json.Unmarshal(mem, &body); err != nil {
			return fmt.Errorf("asking %q: an adapter's request members: %w", model, err)
		}
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rep.BaseURL+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range rep.Header {
		req.Header[k] = v
	}
	resp, err := fleet.ClientFor(modelClient, rep).Do(req)
	if err != nil {
		if ctx.Err() == nil {
			a.ReportFailure(rep)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, msg)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
