package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/llmgw/mirror"
)

// PeerCall sends a request to another node's node-to-node endpoint and
// returns its answer's body.
func (m *Member) PeerCall(ctx context.Context, method, addr, path string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Transport: m.transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("reaching the node at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the node at %s answered %s: %s", addr, resp.Status, bytes.TrimSpace(raw[:min(len(raw), 512)]))
	}
	return raw, nil
}

// CallLive sends a POST of body to path on every live node but this one,
// in name order, each bounded to 10s, and returns each node's answer by
// node name; err names the nodes that could not be asked.
func (m *Member) CallLive(ctx context.Context, path string, body any) (map[string][]byte, error) {
	targets := m.LiveNodes()
	slices.SortFunc(targets, func(x, y PeerTarget) int { return strings.Compare(x.Name, y.Name) })
	out := map[string][]byte{}
	var errs []error
	for _, t := range targets {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		raw, err := m.PeerCall(cctx, http.MethodPost, t.Addr, path, body)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", t.Name, err))
			continue
		}
		out[t.Name] = raw
	}
	return out, errors.Join(errs...)
}

// CachedWeights lists the weights in this node's cache as sources
// (mirror://model and mirror://model/version), rescanned every 10s: the
// leader prefers a node that has them.
func (m *Member) CachedWeights(mir *mirror.Mirror) []string {
	if mir == nil {
		return nil
	}
	if now().Sub(m.cachedAt) < 10*time.Second {
		return m.cached
	}
	m.cachedAt = now()
	vs, err := mir.Cached()
	if err != nil {
		return m.cached
	}
	m.cached = m.cached[:0]
	for _, v := range vs {
		if v.Complete {
			m.cached = append(m.cached, "mirror://"+v.Model, "mirror://"+v.Model+"/"+v.Version)
		}
	}
	return m.cached
}

// WeightsKey is how a model's source names the weights a node may have
// cached: mirror://model or mirror://model/version.
func WeightsKey(source string) string {
	rest, ok := strings.CutPrefix(source, "mirror://")
	if !ok {
		return source
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) >= 2 {
		return "mirror://" + parts[0] + "/" + parts[1]
	}
	return source
}
