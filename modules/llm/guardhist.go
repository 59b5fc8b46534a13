package llm

import (
	"net/http"

	"github.com/llmgw/llmgw/modules/llm/guardhist"
	"github.com/llmgw/llmgw/modules/llm/overview"
)

// The guardrails' outcomes over time (package guardhist): sampled once a
// minute from the gateway's metrics, kept for a day on the node or, in a
// cluster, in Redis (guardhist_store.go). Nothing is added to the request
// path: the guardrails count as they always did.

var guardHistoryOperations = []operation{
	{"GET", "/llm/guardrails/history", "The guardrails' outcomes over time (passed, redacted, blocked, flagged, skipped, errored per check and stage): ?window= (default 24h, at most 24h) in steps of ?step= (default 1h, at least 1m); kept for a day, sampled each minute from the gateway's metrics; in a cluster, every node's", "/llm/guardrails/history", getGuardHistory, ""},
}

// startGuardHist gives the config the guardrails' history, which the
// previous config's, if any, hands on, and samples it once a minute while
// the config runs.
func (a *App) startGuardHist() {
	o := guardhist.Options{Totals: overview.GuardrailTotals, Logger: a.logger, Now: now}
	if a.cluster != nil {
		o.Store = a.cluster
	}
	a.guardHist = guardhist.Open(o)
	go a.guardHist.Run(a.ctx)
}

func getGuardHistory(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	rng, err := guardhist.ParseRange(q.Get("window"), q.Get("step"))
	if err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	h, err := a.guardHist.Read(r.Context(), rng)
	if err != nil { // the cluster store's
		if a.cluster != nil {
			err = a.cluster.StoreErr(err)
		}
		return apiErr(http.StatusServiceUnavailable, "%v", err)
	}
	return writeJSON(w, h)
}
