package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"reflect"
	"slices"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"

	"github.com/llmgw/llmgw/modules/internal/jsonerr"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// decodeModel reads the body of POST /llm/models and POST /llm/plan: a
// model in its JSON shape.
func decodeModel(w http.ResponseWriter, r *http.Request) (*catalog.Model, error) {
	var m catalog.Model
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxModelBody))
	if err != nil {
		return nil, apiErr(http.StatusBadRequest, "reading the model: %v", err)
	}
	// A number where a string goes (an option's 50) is that string.
	dec := json.NewDecoder(bytes.NewReader(jsonerr.Lenient(body, reflect.TypeOf(m))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, apiErr(http.StatusBadRequest, "the body must be a model in JSON, as in the config's apps.llm.models: %s", jsonerr.Describe(err))
	}
	return &m, nil
}

// checkSource checks the model's source unless it opts out. The caller
// holds a.mu (it may start the model's engine to learn its formats).
func (a *App) checkSource(ctx context.Context, m *catalog.Model) (*llmapi.SourceCheck, error) {
	if m.CheckSource != nil && !*m.CheckSource {
		return &llmapi.SourceCheck{Source: mirror.RedactURL(m.Source), Kind: "none", Note: "not checked: check_source is false"}, nil
	}
	var formats []string
	if p, ok := a.engines.Get(m.Engine); ok {
		formats = p.Info().Formats
	} else if catalog.CheckEngineType(m.Name, m.Engine) == nil {
		if p, _, err := a.loadEngine(m.Engine); err == nil {
			formats = p.Info().Formats
		}
	}
	sc, err := a.sourceChecker().Check(ctx, m, formats)
	if err == nil {
		err = a.checkAdapterSources(ctx, m, m.Adapters, formats)
	}
	return &sc, err
}

func (a *App) sourceChecker() *weights.SourceChecker {
	mr := a.mirror
	if mr == nil {
		mr = a.node.Mirror()
	}
	// URL sources given at run time reach only what the egress policy
	// allows; the registry is the config's.
	return &weights.SourceChecker{Client: &http.Client{Timeout: weights.SourceCheckTimeout}, URLClient: a.Egress().Client(weights.SourceCheckTimeout), Mirror: mr,
		Registry: a.Mirror.WithDefaults("").Registry, Token: os.Getenv("HF_TOKEN")}
}

// warnSources checks the sources of the config's models in the
// background and warns about those that fail: they are served anyway, as
// before, but the operator learns why the first start will fail.
func (a *App) warnSources(ctx context.Context, models []*catalog.Model, formats map[string][]string) {
	defer func() {
		if r := recover(); r != nil {
			a.logger.Error("checking the config's model sources panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	c := a.sourceChecker()
	c.URLClient = nil // the config file's sources are not limited
	for _, m := range models {
		if ctx.Err() != nil {
			return
		}
		f, ok := formats[m.Engine]
		if !ok || m.Source == "" || (m.CheckSource != nil && !*m.CheckSource) {
			continue
		}
		if _, err := c.Check(ctx, m, f); err != nil && ctx.Err() == nil {
			a.logger.Warn("a model's source failed its check; its replicas will fail to start until it is fixed",
				zap.String("model", m.Name), zap.Error(err))
		}
	}
}

// sourceStatus maps a failed source check to the admin API's answer.
func sourceStatus(err error) error {
	var se *weights.SourceError
	if errors.As(err, &se) {
		return apiErr(http.StatusUnprocessableEntity, "%v", se)
	}
	return apiErr(http.StatusBadRequest, "%v", err)
}

// engineFormats are the weight formats of the engines running now.
func (a *App) engineFormats() map[string][]string {
	out := map[string][]string{}
	types, ps := a.engines.All()
	for i, typ := range types {
		out[typ] = ps[i].Info().Formats
	}
	return out
}

// nodeName names this node in plans: its cluster name, else the host's.
func (a *App) nodeName() string {
	if a.Cluster != nil && a.Cluster.Node != "" {
		return a.Cluster.Node
	}
	h, _ := os.Hostname()
	return h
}

// postPlan answers POST /llm/plan: the model is checked as an add checks
// it (the whole catalog's rules, its source) and placed on a copy of the
// node's ledger. Nothing changes.
func postPlan(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return apiErr(http.StatusMethodNotAllowed, "use POST with a model, as for POST /llm/models")
	}
	a, err := running()
	if err != nil {
		return err
	}
	m, err := decodeModel(w, r)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.v()
	if _, err := catalog.NewCatalog(append(slices.Clone(cur.models), m)); err != nil {
		return apiErr(http.StatusBadRequest, "%v", err)
	}
	// The engine's own rules, as provisionModel applies them to an add.
	ps, _, err := a.loadShapes(m) // each profile's engine
	if err != nil && a.cluster == nil {
		return apiErr(http.StatusBadRequest, "model %q: %v", m.Name, err)
	}
	for i, p := range ps { // in a cluster this node need not have the engine, as for an add
		if err := catalog.CheckEngineSettings(m.Shape(i), p.Info()); err != nil {
			return apiErr(http.StatusBadRequest, "%v", err)
		}
	}
	sc, serr := a.checkSource(r.Context(), m)
	n, note := m.Scaling.MinReplicas(), ""
	switch {
	case m.Scaling.Kept():
		n, note = 1, "max is 0: the model is kept in the catalog and never started; this is where its first replica would go once it is scaled up"
	case n == 0:
		n, note = 1, "min is 0: the model starts on its first request; this is where that replica would go"
	}
	var pl llmapi.Plan
	if a.cluster != nil {
		pl = a.planCluster(m, n)
	} else {
		pl = a.node.Ledger.PlanOn(m, n, a.nodeName())
	}
	pl.Note, pl.Node, pl.SourceCheck = note, a.node.Ledger.Status(), sc
	if serr != nil {
		pl.SourceError = serr.Error()
	}
	a.logger.Debug("placement planned", zap.String("model", m.Name), zap.Bool("fits", pl.Fits))
	return writeJSON(w, pl)
}

// planCluster places n replicas of m as the cluster's leader would once
// m is in the catalog (cluster.PlanAdd). a.mu is held.
func (a *App) planCluster(m *catalog.Model, n int) llmapi.Plan {
	nodes, cur := a.cluster.Snapshot()
	return cluster.PlanAdd(nodes, cur, a.clusterSide().PlanInputs(nodes), m, n, now())
}
