package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/licences"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// licencesKey keeps the licences' acceptances in the app's storage (the
// cluster's store in a cluster).
const licencesKey = "llmgw/licences.json"

// loadLicences reads the acceptances from storage.
func (a *App) loadLicences(ctx context.Context) error {
	b, err := a.storage.Load(ctx, licencesKey)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("loading the licences' acceptances: %w", err)
	}
	t, err := licences.Parse(b)
	if err == nil {
		a.licences.Store(t)
	}
	return err
}

// LicenceRefusal is why project (org/team/project, "" without a key's
// tenant) may not use m: its licence was not accepted for it. It is nil
// when m has no licence or it was accepted. In a cluster an acceptance
// made through another node is read from the store.
func (a *App) LicenceRefusal(ctx context.Context, m *catalog.Model, project string) error {
	l := m.Licence
	if l == nil || a.licences.Load().Accepted(m.Name, l.Name, project) {
		return nil
	}
	if a.cluster != nil && a.loadLicences(ctx) == nil && a.licences.Load().Accepted(m.Name, l.Name, project) {
		return nil
	}
	return &licences.RefusedError{Model: m.Name, Licence: l.Name, URL: l.URL, Project: project}
}

// acceptLicence answers POST /llm/models/<name>/licence/accept with
// {"tenant": "org[/team[/project]]"} ("" or none: for everyone).
func (a *App) acceptLicence(w http.ResponseWriter, r *http.Request, name string) error {
	m, err := a.Lookup(name)
	if err != nil {
		return apiErr(http.StatusNotFound, "%v", err)
	}
	if m.Licence == nil {
		return apiErr(http.StatusConflict, "model %q is served under no licence: there is nothing to accept", m.Name)
	}
	var body struct {
		Tenant string `json:"tenant"`
	}
	if raw, _ := io.ReadAll(io.LimitReader(r.Body, 4096)); len(raw) > 0 && json.Unmarshal(raw, &body) != nil {
		return apiErr(http.StatusBadRequest, `the body must be JSON like {"tenant":"org/team"}, or empty to accept for everyone`)
	}
	if _, _, ok := a.tenants.Load().Find(body.Tenant); body.Tenant != "" && !ok {
		return apiErr(http.StatusBadRequest, "tenant %s is not an organisation, team or project of the tenancy", catalog.Bounded(body.Tenant))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cluster != nil {
		if err := a.loadLicences(r.Context()); err != nil {
			return apiErr(http.StatusServiceUnavailable, "%v", err)
		}
	}
	t := a.licences.Load().With(licences.Acceptance{Model: m.Name, Licence: m.Licence.Name, Tenant: body.Tenant,
		By: catalog.BoundedLog(r.Header.Get("X-Llmgw-Actor")), At: now().UTC()})
	if err := a.storage.Store(r.Context(), licencesKey, t.Marshal()); err != nil {
		return apiErr(http.StatusInternalServerError, "saving the acceptance: %v", err)
	}
	a.licences.Store(t)
	a.audit(r, "licence accepted", zap.String("model", m.Name), zap.String("licence", m.Licence.Name), zap.String("tenant", body.Tenant))
	return writeJSON(w, a.licenceStatus(m))
}

// getLicences answers GET /llm/licences: every model served under a
// licence, and for whom it was accepted.
func getLicences(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	out := []llmapi.LicenceStatus{}
	for _, m := range a.v().models {
		if m.Licence != nil {
			out = append(out, a.licenceStatus(m))
		}
	}
	return writeJSON(w, out)
}

// licenceStatus is m's licence and its acceptances.
func (a *App) licenceStatus(m *catalog.Model) llmapi.LicenceStatus {
	st := llmapi.LicenceStatus{Model: m.Name, Licence: *m.Licence, Accepted: []licences.Acceptance{}}
	for _, acc := range a.licences.Load().All() {
		if acc.Model == m.Name && acc.Licence == m.Licence.Name {
			st.Accepted = append(st.Accepted, acc)
		}
	}
	return st
}
