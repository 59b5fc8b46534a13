package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// usedWeights resolves every catalog model's weights to the mirror
// version it uses: a pinned version as it is, mirror://m as m's current
// version, an hf:// or URL source as the version added from it (the
// current one first). When that cannot be told (the stores do not
// answer), every version of that mirror model counts as used.
func (a *App) usedWeights(ctx context.Context, mr *mirror.Mirror) weights.Use {
	u := weights.Use{IDs: map[string][]string{}, Whole: map[string][]string{}, Why: map[string]string{}}
	var list []mirror.VersionInfo
	var listErr error
	listed := false
	for _, m := range weights.WithAdapterSources(a.v().models) {
		mm, mv, ok := weights.MirrorRef(m)
		if !ok {
			continue
		}
		if mv == "" && strings.HasPrefix(m.Source, "mirror://") {
			v, err := mr.Current(ctx, mm)
			if err != nil {
				u.Whole[mm] = append(u.Whole[mm], m.Name)
				u.Why[mm] = "which version " + m.Name + " uses could not be told: " + err.Error()
				continue
			}
			mv = v
		}
		if mv == "" {
			if !listed {
				list, listErr = mr.List(ctx)
				listed = true
			}
			for _, v := range list { // oldest first: the current one, else the newest
				if v.Model == mm && v.Origin.Source == m.Source {
					if mv = v.Version; v.Current {
						break
					}
				}
			}
			if mv == "" {
				u.Whole[mm] = append(u.Whole[mm], m.Name)
				u.Why[mm] = "which version " + m.Name + " uses could not be told"
				if listErr != nil {
					u.Why[mm] += ": " + listErr.Error()
				}
				continue
			}
		}
		id := mm + "/" + mv
		u.IDs[id] = append(u.IDs[id], m.Name)
	}
	return u
}

// nodeWeights lists this node's weights directory.
func (a *App) nodeWeights(ctx context.Context) (llmapi.NodeWeights, error) {
	nw := llmapi.NodeWeights{Node: a.nodeName(), Used: []llmapi.WeightsEntry{}, Unused: []llmapi.WeightsEntry{}}
	mr := a.mirror
	if mr == nil || mr.CacheDir() == "" {
		nw.Note = "the mirror is not in use on this node: weights come from the paths models name, which llmgw does not manage"
		return nw, nil
	}
	nw.Dir = mr.CacheDir()
	u := a.usedWeights(ctx, mr)
	entries, err := mr.CacheEntries()
	if err != nil {
		return nw, err
	}
	for _, e := range entries {
		we := llmapi.WeightsEntry{CacheEntry: e}
		if e.Version != "" {
			we.UsedBy = slices.Concat(u.IDs[e.Model+"/"+e.Version], u.Whole[e.Model])
			switch {
			case len(u.IDs[e.Model+"/"+e.Version]) == 0 && len(u.Whole[e.Model]) > 0:
				we.Why = u.Why[e.Model]
			case len(we.UsedBy) == 0 && e.Held:
				we.Why = "a replica holds it or it is being fetched"
			}
		}
		if len(we.UsedBy) > 0 || e.Held {
			nw.Used, nw.UsedBytes = append(nw.Used, we), nw.UsedBytes+e.Size
			continue
		}
		nw.Unused, nw.UnusedBytes = append(nw.Unused, we), nw.UnusedBytes+e.Size
	}
	return nw, nil
}

// getWeights answers GET /llm/weights[?node=N]: this node's weights
// directory and, in a cluster, every live node's, asked through the
// node-to-node endpoint.
func getWeights(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	out, err := a.eachNode(r, func(ctx context.Context) (any, error) {
		nw, err := a.nodeWeights(ctx)
		return nw, err
	}, http.MethodGet, "/weights", nil, decodeAs[llmapi.NodeWeights], func(name string, err error) any {
		return llmapi.NodeWeights{Node: name, Used: []llmapi.WeightsEntry{}, Unused: []llmapi.WeightsEntry{}, Error: err.Error()}
	})
	if err != nil {
		return err
	}
	return writeJSON(w, map[string]any{"nodes": out})
}

// postWeightsPrune answers POST /llm/weights/prune[?node=N][&dry_run=true]:
// on each node it removes what GET /llm/weights lists as unused there,
// checking again under the node cache's lock.
func postWeightsPrune(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return apiErr(http.StatusMethodNotAllowed, "use POST /llm/weights/prune[?node=N][&dry_run=true]")
	}
	a, err := running()
	if err != nil {
		return err
	}
	var req pruneRequest
	if r.ContentLength != 0 {
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
			return apiErr(http.StatusBadRequest, `the body must be JSON like {"dry_run":true}, or empty: %v`, err)
		}
	}
	req.DryRun = req.DryRun || r.URL.Query().Get("dry_run") == "true"
	out, err := a.eachNode(r, func(ctx context.Context) (any, error) {
		return a.pruneWeights(ctx, req.DryRun)
	}, http.MethodPost, "/weights/prune", req, decodeAs[llmapi.WeightsPruned], func(name string, err error) any {
		return llmapi.WeightsPruned{Node: name, DryRun: req.DryRun, Removed: []mirror.CacheEntry{}, Error: err.Error()}
	})
	if err != nil {
		return err
	}
	if !req.DryRun {
		for _, o := range out {
			p, _ := o.(llmapi.WeightsPruned)
			if p.Error != "" || len(p.Removed) == 0 {
				continue
			}
			paths := make([]string, len(p.Removed))
			for i, e := range p.Removed {
				paths[i] = e.Path
			}
			a.audit(r, "weights pruned", zap.String("node", p.Node), zap.Strings("paths", paths), zap.Int64("bytes", p.Freed))
		}
	}
	return writeJSON(w, map[string]any{"nodes": out})
}

type pruneRequest struct {
	DryRun bool `json:"dry_run"`
}

// pruneWeights removes this node's left-over weights (or says what it
// would with dryRun).
func (a *App) pruneWeights(ctx context.Context, dryRun bool) (llmapi.WeightsPruned, error) {
	out := llmapi.WeightsPruned{Node: a.nodeName(), DryRun: dryRun, Removed: []mirror.CacheEntry{}}
	mr := a.mirror
	if mr == nil || mr.CacheDir() == "" {
		out.Note = "the mirror is not in use on this node: nothing to prune"
		return out, nil
	}
	// Models change under a.mu: none is added between reading the
	// catalog and removing what it does not use.
	a.mu.Lock()
	defer a.mu.Unlock()
	u := a.usedWeights(ctx, mr)
	removed, err := mr.PruneCache(u.Keep, dryRun)
	for _, e := range removed {
		out.Freed += e.Size
	}
	out.Removed = append(out.Removed, removed...)
	if err != nil {
		return out, fmt.Errorf("pruning the weights directory: %w (removed %d entries first)", err, len(removed))
	}
	return out, nil
}

// eachNode runs local on this node and, in a cluster, sends method path
// (with body) to every other live node's node-to-node endpoint, at once;
// ?node=N keeps one node. A node that fails gives failed(name, err).
func (a *App) eachNode(r *http.Request, local func(context.Context) (any, error), method, path string, body any,
	decode func([]byte) (any, error), failed func(string, error) any) ([]any, error) {
	want := r.URL.Query().Get("node")
	self := a.nodeName()
	targets := []peerTarget{{name: self}}
	if m := a.cluster; m != nil {
		targets = append(targets, m.liveNodes()...)
	}
	if want != "" {
		targets = slices.DeleteFunc(targets, func(t peerTarget) bool { return t.name != want })
		if len(targets) == 0 {
			return nil, apiErr(http.StatusNotFound, "no live node %s; GET /llm/nodes lists them", catalog.Bounded(want))
		}
	}
	slices.SortFunc(targets, func(x, y peerTarget) int { return strings.Compare(x.name, y.name) })
	out := make([]any, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
			defer cancel()
			var v any
			var err error
			if t.addr == "" {
				v, err = local(ctx)
			} else {
				var raw []byte
				if raw, err = a.cluster.peerCall(ctx, method, t.addr, path, body); err == nil {
					v, err = decode(raw)
				}
			}
			if err != nil {
				v = failed(t.name, err)
			}
			out[i] = v
		}()
	}
	wg.Wait()
	return out, nil
}

func decodeAs[T any](raw []byte) (any, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

// peerCall sends a request to another node's node-to-node endpoint and
// returns its answer's body.
func (m *member) peerCall(ctx context.Context, method, addr, path string, body any) ([]byte, error) {
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

// servePeerWeights answers another node's GET /weights and POST
// /weights/prune on the node-to-node endpoint, for its admin API.
func (a *App) servePeerWeights(w http.ResponseWriter, r *http.Request) {
	var v any
	var err error
	switch {
	case r.URL.Path == "/weights" && r.Method == http.MethodGet:
		v, err = a.nodeWeights(r.Context())
	case r.URL.Path == "/weights/prune" && r.Method == http.MethodPost:
		var req pruneRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil {
			http.Error(w, "the body must be {\"dry_run\":…}: "+err.Error(), http.StatusBadRequest)
			return
		}
		v, err = a.pruneWeights(r.Context(), req.DryRun)
	default:
		http.Error(w, "use GET /weights or POST /weights/prune", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = writeJSON(w, v)
}
