package llmrouter

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/internal/adminroute"
	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// The router's admin routes, served by the llm app under
// /llm/providers/ (admin endpoint and llm_admin sites) with its roles:
// the live state of the providers of each model served by several, as
// the policies order them. With several llm_router handlers (several
// sites), they show the state of the one provisioned last.
var adminOps = []llm.AdminOperation{
	{Method: "GET", Path: "/llm/providers/models", Summary: "Every model with providers that this node's router has routed, by name: its policy and latency objective, and for each provider its state (ready, slow, over_limits, full, resting), until when and why it rests (429 or failures), failures in a row, recent time to first byte, this minute's requests and tokens against its rpm and tpm, and the headroom its rate-limit headers reported; no key or header value. With several llm_router handlers, the one provisioned last answers"},
	{Method: "GET", Path: "/llm/providers/models/{name}", Summary: "One model with providers and its providers' live state, as in GET /llm/providers/models (shown even before its first request); 404 for a name that is not a model with providers (write a / in the name as %2F)"},
}

// init describes the routes for the OpenAPI document and declares them.
func init() {
	llm.DescribeAdminOperations(adminOps...)
	for _, op := range adminOps {
		adminroute.Declare("providers", adminroute.Op{Method: op.Method, Path: op.Path})
	}
}

// providersAdmin answers the routes for the latest llm_router handler.
type providersAdmin struct{ rt *Router }

// ServeHTTP answers one declared route (the app matched it).
func (a providersAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	now := time.Now().UnixNano()
	if r.Pattern == "GET /llm/providers/models" {
		return answerJSON(w, a.rt.providerModels(now))
	}
	name := r.PathValue("name")
	m, err := a.rt.app.Lookup(name)
	var unknown *catalog.UnknownModelError
	switch {
	case errors.As(err, &unknown):
		return adminErr(http.StatusNotFound, "no model %s here; GET /llm/providers/models lists the models with providers this node has routed, GET /llm/models every model", catalog.Bounded(name))
	case err != nil:
		return adminErr(http.StatusNotFound, "model %s: %v; GET /llm/providers/models lists the models with providers", catalog.Bounded(name), err)
	case len(m.Providers) == 0:
		return adminErr(http.StatusNotFound, "model %q has no providers: its own replicas serve it (GET /llm/models/%s shows them); GET /llm/providers/models lists the models with providers", m.Name, m.Name)
	}
	return answerJSON(w, a.rt.providerSet(m).view(now, a.rt.room))
}

// providerModels are the models with providers the router has routed,
// as the catalog has them now, by name.
func (rt *Router) providerModels(now int64) []llmapi.ProvidersModel {
	out := []llmapi.ProvidersModel{}
	rt.provs.Range(func(k, v any) bool {
		m := k.(*catalog.Model)
		if cur, err := rt.app.Lookup(m.Name); err == nil && cur == m { // not a model the catalog has since replaced
			out = append(out, v.(*providerSet).view(now, rt.room))
		}
		return true
	})
	slices.SortFunc(out, func(x, y llmapi.ProvidersModel) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// view is the set's live state at now. It only loads atomics: requests
// routed meanwhile are not held up.
func (ps *providerSet) view(now int64, room roomFunc) llmapi.ProvidersModel {
	out := llmapi.ProvidersModel{Name: ps.model.Name, Policy: ps.policy, LatencyObjectiveMS: millis(ps.slo),
		Providers: make([]llmapi.ProviderState, len(ps.provs))}
	for i := range ps.provs {
		st, p := &ps.provs[i], ps.model.Providers[i]
		v := llmapi.ProviderState{Name: p.Name, Model: st.name, SelfHosted: st.selfHosted, Price: p.Price, PriceRank: math.Round(st.rank*1e6) / 1e6,
			Weight: st.weight, RPM: int(st.rpm), TPM: int(st.tpm), State: st.stateName(now, ps.slo, room),
			FailuresInARow: int(st.fails.Load())}
		if until := st.restUntil.Load(); until > now {
			v.RestingUntil = time.Unix(0, until).UTC()
			v.RestReason = restNames[min(max(st.restWhy.Load(), 0), int32(len(restNames)-1))]
		}
		if sampled := st.sampled.Load(); sampled > 0 {
			ms := millis(st.ttft.Load())
			v.TTFTMS, v.LastSampled = &ms, time.Unix(0, sampled).UTC()
		}
		if st.rpm > 0 || st.tpm > 0 {
			var reqs, tokens int64
			if now-st.winStart.Load() < int64(time.Minute) {
				reqs, tokens = st.winReqs.Load(), st.winTokens.Load()
			}
			v.MinuteRequests, v.MinuteTokens = &reqs, &tokens
		}
		if h := st.headroom.Load(); h != headroomUnknown {
			share := float64(h) / headroomUnknown
			v.Headroom = &share
		}
		out.Providers[i] = v
	}
	return out
}

// stateName is the provider's state at now as ordering sees it, by name.
func (st *providerStats) stateName(now, slo int64, room roomFunc) string {
	switch st.state(now, slo, room) {
	case stateResting:
		return "resting"
	case stateFull:
		if st.overLimits(now) {
			return "over_limits"
		}
		return "full"
	case stateSlow:
		return "slow"
	}
	return "ready"
}

// millis is nanos as milliseconds, to the microsecond.
func millis(nanos int64) float64 { return math.Round(float64(nanos)/1e3) / 1e3 }

// adminErr is an admin API error: {"error": "…"} with status.
func adminErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

func answerJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}
