package llm

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"

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
	out := llmapi.Retried{ModelStatus: llmapi.ModelStatus{Name: m.Name, State: "not run on this node"}}
	if f != nil {
		if f.Retry() {
			out.Nodes = append(out.Nodes, a.nodeName())
		}
		out.ModelStatus = f.Status()
	}
	if local := len(out.Nodes); a.cluster != nil { // the other nodes' fleets of the model
		answers, err := a.cluster.CallLive(r.Context(), "/models/retry", peerRetry{Model: m.Name})
		for node, raw := range answers {
			var ans peerRetried
			if json.Unmarshal(raw, &ans) == nil && ans.Retried {
				out.Nodes = append(out.Nodes, node)
			}
		}
		slices.Sort(out.Nodes[local:]) // this node first, then by name
		if err != nil && len(out.Nodes) == 0 {
			return apiErr(http.StatusBadGateway, "retrying the start of model %q: %v", m.Name, err)
		}
	}
	if len(out.Nodes) == 0 {
		return apiErr(http.StatusConflict, "model %q is not failing to start (it is %s); a retry starts only a model whose last start failed and that waits to start again",
			m.Name, strings.TrimSuffix(out.State+": "+out.Reason, ": "))
	}
	if a.cluster == nil {
		out.Nodes = nil // one node: nothing to name
	}
	a.audit(r, "model start retried", zap.String("model", m.Name), zap.Strings("nodes", out.Nodes))
	return writeJSON(w, out)
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
