package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// modelClient reaches replicas for modules that use a catalog model
// themselves (the cache's embedder, a guard model).
var modelClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}

// Embeddings asks a catalog model (by name or alias) for the embeddings
// of texts, through one of its replicas chosen as the router would.
func (a *App) Embeddings(ctx context.Context, model string, texts []string) ([][]float32, error) {
	m, err := a.Lookup(model)
	if err != nil {
		return nil, err
	}
	rep, release, err := a.Acquire(ctx, m.Name, LeastOutstanding{})
	if err != nil {
		return nil, err
	}
	defer release()
	name := m.Name
	if rep.UpstreamModel != "" {
		name = rep.UpstreamModel
	}
	body, _ := json.Marshal(map[string]any{"model": name, "input": texts})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rep.BaseURL+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range rep.Header {
		req.Header[k] = v
	}
	resp, err := modelClient.Do(req)
	if err != nil {
		a.ReportFailure(rep)
		return nil, fmt.Errorf("embedding with %q: %w", model, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("embedding with %q: %s: %s", model, resp.Status, b)
	}
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("embedding with %q: %w", model, err)
	}
	vecs := make([][]float32, len(texts))
	for _, d := range out.Data {
		if d.Index >= 0 && d.Index < len(vecs) {
			vecs[d.Index] = d.Embedding
		}
	}
	for i, v := range vecs {
		if v == nil {
			return nil, fmt.Errorf("embedding with %q: no vector for input %d", model, i)
		}
	}
	return vecs, nil
}
