// Package modelcall asks a catalog model for embeddings or a short chat
// answer on behalf of a module that uses a model itself (the cache's
// embedder, a guard model, a knowledge base's embedder), through a
// replica picked as the router would.
package modelcall

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
)

// Picker finds a model and one of its replicas: the llm app.
type Picker interface {
	Lookup(name string) (*catalog.Model, error)
	Acquire(ctx context.Context, model string, sel fleet.Selector) (*fleet.Replica, func(), error)
	ReportFailure(r *fleet.Replica)
}

// Client reaches replicas; the zero value is not usable: see New.
type Client struct{ http *http.Client }

// New is a client with its own pool of connections to replicas.
func New() *Client {
	return &Client{http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}}
}

// Embeddings asks model for the embeddings of texts, and returns the
// prompt tokens it reports having used (0 when it reports none).
func (c *Client) Embeddings(ctx context.Context, p Picker, model string, texts []string) ([][]float32, int64, error) {
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := c.call(ctx, p, model, "/embeddings", map[string]any{"input": texts}, &out); err != nil {
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

// Message is one message of a Chat call.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Chat asks model for a short answer (temperature 0).
func (c *Client) Chat(ctx context.Context, p Picker, model string, messages []Message, maxTokens int) (string, error) {
	var out openai.ChatAnswer
	body := map[string]any{"messages": messages, "max_tokens": maxTokens, "temperature": 0}
	if err := c.call(ctx, p, model, "/chat/completions", body, &out); err != nil {
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
func (c *Client) call(ctx context.Context, p Picker, model, path string, body map[string]any, out any) error {
	m, err := p.Lookup(model)
	if err != nil {
		return err
	}
	rep, release, err := p.Acquire(ctx, m.Name, fleet.LeastOutstanding{})
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
	resp, err := fleet.ClientFor(c.http, rep).Do(req)
	if err != nil {
		if ctx.Err() == nil {
			p.ReportFailure(rep)
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
