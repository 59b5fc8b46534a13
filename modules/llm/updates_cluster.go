package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// In a cluster an update or rollback changes the mirror model's current
// version once (the stores are shared), then asks every live node in
// turn, through the node-to-node endpoint, to replace its replicas of the
// model: each old one drains and the node starts its replacement on the
// new version, one at a time, while the model's replicas on the other
// nodes serve.

// peerRoll is the body of POST /models/roll on the node-to-node endpoint.
type peerRoll struct {
	Model  string `json:"model"`
	Reason string `json:"reason"`
}

// rollCluster replaces the model's replicas on every live node, one node
// after the other, this one first.
func (a *App) rollCluster(ctx context.Context, m *catalog.Model, f *fleet.Fleet, reason string) (llmapi.Rollout, error) {
	out := llmapi.Rollout{Replaced: []string{}, Started: []string{}}
	self := a.nodeName()
	targets := append([]peerTarget{{name: self}}, a.cluster.liveNodes()...)
	slices.SortFunc(targets[1:], func(x, y peerTarget) int { return strings.Compare(x.name, y.name) })
	var done []string
	for _, t := range targets {
		var ro llmapi.Rollout
		var err error
		if t.addr == "" {
			if f != nil {
				ro, err = f.RollInPlace(ctx, reason)
			}
		} else {
			var raw []byte
			raw, err = a.cluster.peerCall(ctx, http.MethodPost, t.addr, "/models/roll", peerRoll{Model: m.Name, Reason: reason})
			if err == nil {
				err = json.Unmarshal(raw, &ro)
			}
		}
		out.Replaced = append(out.Replaced, ro.Replaced...)
		out.Started = append(out.Started, ro.Started...)
		if err != nil {
			return out, fmt.Errorf("node %s: %w (nodes done: %s)", t.name, err, listOr(done, "none"))
		}
		done = append(done, t.name)
	}
	out.Note = "replaced node by node: " + strings.Join(done, ", ")
	return out, nil
}

func listOr(s []string, none string) string {
	if len(s) == 0 {
		return none
	}
	return strings.Join(s, ", ")
}

// servePeerRoll answers another node's POST /models/roll: this node's
// replicas of the model are replaced, one at a time.
func (a *App) servePeerRoll(w http.ResponseWriter, r *http.Request) {
	var req peerRoll
	if r.Method != http.MethodPost || json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req) != nil {
		http.Error(w, `use POST /models/roll with {"model":…,"reason":…}`, http.StatusBadRequest)
		return
	}
	// The node asking changed the model (a live change) before it asked:
	// this node applies the shared state first, so that its new replicas
	// start with the model as it is now.
	if a.cluster != nil {
		if err := a.cluster.sync(r.Context(), a.clusterSide()); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	f := a.v().fleets[req.Model]
	out := llmapi.Rollout{Replaced: []string{}, Started: []string{}}
	if f != nil {
		n := f.ReplicaCount()
		ctx, cancel := context.WithTimeout(r.Context(), a.rollTimeout(n))
		defer cancel()
		var err error
		if out, err = f.RollInPlace(ctx, catalog.Bounded(req.Reason)); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
	}
	_ = writeJSON(w, out)
}
