package llm

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"go.uber.org/zap"
)

// shared are the admin routes whose changes are the cluster's: in a
// cluster they are made under its change lock, on its latest state.
var shared = map[string]bool{"/llm/models": true, "/llm/models/": true, "/llm/keys": true, "/llm/keys/": true, "/llm/nodes/": true,
	"/llm/tenants": true, "/llm/tenants/": true} // the tenancy tree (admin_tenants.go)

// clusterChange runs a change under the cluster's change lock; reads and
// single-node gateways go straight through.
func clusterChange(h caddy.AdminHandlerFunc) caddy.AdminHandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			return h(w, r)
		}
		a := runningApp()
		if a == nil || a.cluster == nil {
			return h(w, r)
		}
		var handlerErr error
		err := a.cluster.Change(r.Context(), a.clusterSide(), func() error { handlerErr = h(w, r); return handlerErr })
		var busy *cluster.UnavailableError
		// errors.Is, not ==: an error of the handler may be a
		// caddy.APIError, which == cannot compare (it holds a slice).
		if errors.As(err, &busy) && !errors.Is(err, handlerErr) {
			return apiErr(http.StatusServiceUnavailable, "%v", busy)
		}
		return err
	}
}

func getNodes(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	if a.cluster == nil {
		return apiErr(http.StatusNotFound, "this llmgw is not in a cluster (no cluster block in the llm option); GET /llm/node shows this node")
	}
	st := a.cluster.Status(a.drainedNodes())
	sort.Slice(st.Nodes, func(i, j int) bool { return st.Nodes[i].Name < st.Nodes[j].Name })
	return writeJSON(w, st)
}

// nodeAction answers POST /llm/nodes/<name>/drain|undrain.
func nodeAction(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	name, action, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/llm/nodes/"), "/")
	if !ok || r.Method != http.MethodPost || (action != "drain" && action != "undrain" && action != "upgrade") {
		return apiErr(http.StatusNotFound, "use POST /llm/nodes/<name>/drain, /undrain or /upgrade")
	}
	if a.cluster == nil {
		return apiErr(http.StatusNotFound, "this llmgw is not in a cluster (no cluster block in the llm option)")
	}
	if action == "upgrade" {
		return a.nodeUpgrade(w, r, name) // node_upgrade.go
	}
	var names []string
	b, err := a.storage.Load(r.Context(), drainedStorageKey)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return apiErr(http.StatusServiceUnavailable, "%v", err)
	}
	if err == nil {
		_ = json.Unmarshal(b, &names)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == name })
	if action == "drain" {
		if !a.cluster.Knows(name) {
			return apiErr(http.StatusNotFound, "no node %q in the cluster; GET /llm/nodes lists them", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	b, _ = json.Marshal(names)
	if err := a.storage.Store(r.Context(), drainedStorageKey, b); err != nil {
		return apiErr(http.StatusServiceUnavailable, "%v", err)
	}
	a.audit(r, "node "+action+"ed", zap.String("node", name))
	a.cluster.BeatNow()
	return writeJSON(w, map[string]any{"node": name, "drained": action == "drain"})
}
