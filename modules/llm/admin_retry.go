package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// retryModel answers POST /llm/models/<name>/retry: a model whose last
// start failed starts now instead of at the end of its backoff; in a
// cluster on every live node where it failed. 409 when it is not failed.
func (a *App) retryModel(w http.ResponseWriter, r *http.Request, name string) error {
	m, err := a.Lookup(name)
	if err != nil {
		return apiErr(http.StatusNotFound, "%v", err)
	}
	f := a.v().fleets[m.Name]
	out := llmapi.Retried{ModelStatus: llmapi.ModelStatus{Name: m.Name, State: "unknown on this node"}}
	if f == nil && a.cluster == nil {
		return apiErr(http.StatusNotFound, "no model %q", name)
	}
	if a.cluster == nil {
		if f.Retry() {
			out.Nodes = []string{a.nodeName()}
		}
	} else if out.Nodes, err = a.retryCluster(r.Context(), m.Name, f); err != nil && len(out.Nodes) == 0 {
		return apiErr(http.StatusBadGateway, "retrying the start of model %q: %v", m.Name, err)
	}
	if f != nil {
		out.ModelStatus = f.Status()
	}
	if len(out.Nodes) == 0 {
		st := out.ModelStatus
		why := st.State
		if st.Reason != "" {
			why += ": " + st.Reason
		}
		return apiErr(http.StatusConflict, "model %q is not failing to start (it is %s); a retry starts only a model whose last start failed and that waits to start again", m.Name, why)
	}
	if a.cluster == nil {
		out.Nodes = nil // one node: nothing to name
	}
	a.audit(r, "model start retried", zap.String("model", m.Name), zap.Strings("nodes", out.Nodes))
	return writeJSON(w, out)
}

// retryCluster retries the model's failed start on this node and on every
// live node, and returns the nodes that retried it; err says which nodes
// could not be asked.
func (a *App) retryCluster(ctx context.Context, model string, f *fleet.Fleet) ([]string, error) {
	var nodes []string
	if f != nil && f.Retry() {
		nodes = append(nodes, a.nodeName())
	}
	targets := a.cluster.LiveNodes()
	slices.SortFunc(targets, func(x, y cluster.PeerTarget) int { return strings.Compare(x.Name, y.Name) })
	var errs []error
	for _, t := range targets {
		if t.Addr == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		raw, err := a.cluster.PeerCall(cctx, http.MethodPost, t.Addr, "/models/retry", peerRetry{Model: model})
		cancel()
		var ans peerRetried
		if err == nil {
			err = json.Unmarshal(raw, &ans)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", t.Name, err))
			continue
		}
		if ans.Retried {
			nodes = append(nodes, t.Name)
		}
	}
	return nodes, errors.Join(errs...)
}

// peerRetry is the body of POST /models/retry on the node-to-node
// endpoint, and peerRetried its answer.
type peerRetry struct {
	Model string `json:"model"`
}

type peerRetried struct {
	Retried bool `json:"retried"`
}

// servePeerRetry answers another node's POST /models/retry: this node's
// failed start of the model is retried now.
func (a *App) servePeerRetry(w http.ResponseWriter, r *http.Request) {
	var req peerRetry
	if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req) != nil {
		http.Error(w, `use POST /models/retry with {"model":…}`, http.StatusBadRequest)
		return
	}
	f := a.v().fleets[req.Model]
	_ = writeJSON(w, peerRetried{Retried: f != nil && f.Retry()})
}
