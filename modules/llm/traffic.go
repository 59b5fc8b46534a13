package llm

import (
	"net/http"

	"github.com/llmgw/llmgw/modules/llm/traffic"
)

// The answers over time (package traffic), sampled once a minute from
// the gateway's metrics and kept for a day on the node or, in a cluster,
// in Redis. Nothing is added to the request path.
var trafficOperations = []operation{
	{"GET", "/llm/traffic", "The router's answers over time, overall and per model: requests/s, errors/s (status 500 or above, and 429), client errors/s (other 400s, guardrail blocks among them), p50/p95 latency and time to first token, completion tokens/s and replicas ready; ?window= (default 24h, at most 24h) in steps of ?step= (default 1h, at least 1m), ?model= for one model; kept for a day, sampled each minute from the gateway's metrics; in a cluster, every node's", "/llm/traffic", getTraffic, ""},
}

// startTraffic gives the config the answers' history, which the previous
// config's hands on, and samples it once a minute while the config runs.
func (a *App) startTraffic() {
	o := traffic.Options{Status: a.Status, Logger: a.logger, Now: now}
	if a.cluster != nil {
		o.Store, o.Node = a.cluster, a.cluster.NodeName()
	}
	a.traffic = traffic.Open(o)
	go a.traffic.Run(a.ctx)
}

func getTraffic(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	rng, err := traffic.ParseRange(q.Get("window"), q.Get("step"))
	if err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	h, err := a.traffic.Read(r.Context(), rng, q.Get("model"))
	if err != nil && a.cluster != nil { // the cluster store's
		return apiErr(http.StatusServiceUnavailable, "%v", a.cluster.StoreErr(err))
	}
	return writeJSON(w, h)
}
