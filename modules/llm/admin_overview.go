package llm

import (
	"net/http"
	"sort"
	"time"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/overview"
)

// The overview is GET /llm/overview: per model, what the gateway's own
// metrics (those of /metrics) count, as JSON for the console.
var overviewOperations = []operation{
	{"GET", "/llm/overview", "Per model: requests, errors, tokens, time to first token and tokens per second, from the gateway's own metrics since it started, with each model's state and ready replicas", "/llm/overview", getOverview, ""},
}

func getOverview(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	byModel := map[string]*llmapi.ModelOverview{}
	var order []string
	line := func(name string) *llmapi.ModelOverview {
		if o := byModel[name]; o != nil {
			return o
		}
		o := &llmapi.ModelOverview{Model: name}
		byModel[name] = o
		order = append(order, name)
		return o
	}
	for _, s := range a.Status() {
		o := line(s.Name)
		o.State = s.State
		for _, rep := range s.Replicas {
			if fleet.State(rep.State) == fleet.ReplicaReady {
				o.Ready++
			}
		}
	}
	catalog := len(order)
	guard := llmapi.GuardrailOverview{Checks: []llmapi.GuardrailChecks{}, Findings: []llmapi.GuardrailFindings{}}
	if err := overview.ReadMetrics(line, &guard); err != nil {
		return apiErr(http.StatusInternalServerError, "reading the gateway's metrics: %v", err)
	}
	extra := order[catalog:]
	sort.Strings(extra)
	out := make([]llmapi.ModelOverview, 0, len(order))
	for _, name := range order {
		out = append(out, *byModel[name])
	}
	return writeJSON(w, map[string]any{"at": now().UTC().Format(time.RFC3339), "models": out, "guardrails": guard})
}
