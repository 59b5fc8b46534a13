package llm

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"

	"github.com/llmgw/llmgw/modules/internal/jsonerr"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// runningMirror is the running app and its mirror, or the error to answer.
func runningMirror() (*App, *mirror.Mirror, error) {
	a, err := running()
	if err != nil {
		return nil, nil, err
	}
	if a.mirror == nil {
		return nil, nil, apiErr(http.StatusNotFound, "the mirror is not in use; add a mirror block to the llm app, or give a model a mirror:// or hf:// source")
	}
	return a, a.mirror, nil
}

func getMirror(w http.ResponseWriter, r *http.Request) error {
	if _, err := current(r); err != nil { // GET only
		return err
	}
	_, m, err := runningMirror()
	if err != nil {
		return err
	}
	v := llmapi.MirrorView{Sync: m.Status(), Transfers: m.Transfers()}
	for _, s := range m.Stores() {
		v.Stores = append(v.Stores, s.Name())
	}
	v.Cache, _ = m.Cached()
	return writeJSON(w, v)
}

// mirrorErr maps mirror errors to statuses.
func mirrorErr(err error) error {
	var ue *mirror.UnreachableError
	switch {
	case errors.Is(err, mirror.ErrNotFound):
		return apiErr(http.StatusNotFound, "%v", err)
	case errors.As(err, &ue):
		return apiErr(http.StatusBadGateway, "%v", err)
	}
	return apiErr(http.StatusBadRequest, "%v", err)
}

// handleMirrorVersions answers GET and POST /llm/mirror/versions.
func handleMirrorVersions(w http.ResponseWriter, r *http.Request) error {
	a, m, err := runningMirror()
	if err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet:
		list, err := m.List(r.Context())
		if err != nil && len(list) == 0 {
			return mirrorErr(err)
		}
		return writeJSON(w, list)
	case http.MethodPost:
		var req struct {
			Model       string `json:"model"`
			Version     string `json:"version"`
			Source      string `json:"source"`
			AllowPickle bool   `json:"allow_pickle"`
			Track       bool   `json:"track"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			return apiErr(http.StatusBadRequest, "decoding the version: %s; send {\"model\":…,\"source\":…}", jsonerr.Describe(err))
		}
		ctx, err := a.mirrorSourceContext(r, req.Source)
		if err != nil {
			return err
		}
		res, err := m.Add(ctx, mirror.AddOptions{Model: req.Model, Version: req.Version, Source: req.Source, AllowPickle: req.AllowPickle, Track: req.Track})
		if err != nil {
			return mirrorErr(err)
		}
		a.audit(r, "mirror version added", zap.String("model", res.Manifest.Model), zap.String("version", res.Manifest.Version), zap.String("source", mirror.RedactURL(req.Source)))
		return writeJSON(w, res)
	}
	return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use GET or POST", r.Method)
}

// handleMirrorVersion answers /llm/mirror/versions/{model}/{version}[/verify].
func handleMirrorVersion(w http.ResponseWriter, r *http.Request) error {
	a, m, err := runningMirror()
	if err != nil {
		return err
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/llm/mirror/versions/"), "/")
	if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "verify") {
		return apiErr(http.StatusNotFound, "no such route; use /llm/mirror/versions/{model}/{version}[/verify]")
	}
	model, version := parts[0], parts[1]
	switch {
	case len(parts) == 3 && r.Method == http.MethodPost:
		checks, err := m.Verify(r.Context(), model, version)
		if err != nil {
			return mirrorErr(err)
		}
		return writeJSON(w, checks)
	case len(parts) == 2 && r.Method == http.MethodGet:
		man, err := m.Show(r.Context(), model, version)
		if err != nil {
			return mirrorErr(err)
		}
		return writeJSON(w, man)
	case len(parts) == 2 && r.Method == http.MethodDelete:
		if user := a.mirrorUsers(model, version, ""); len(user) > 0 {
			return apiErr(http.StatusConflict, "%s/%s is the source of model %s; change or remove that model first", model, version, strings.Join(user, ", "))
		}
		res, err := m.Remove(r.Context(), model, version, r.Header.Get("X-Llmgw-Actor"))
		if err != nil {
			return mirrorErr(err)
		}
		a.audit(r, "mirror version removed", zap.String("model", model), zap.String("version", version))
		return writeJSON(w, res)
	}
	return apiErr(http.StatusMethodNotAllowed, "method %s not allowed here", r.Method)
}

// postMirrorSync answers POST /llm/mirror/sync[?deep=true].
func postMirrorSync(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		return apiErr(http.StatusMethodNotAllowed, "method %s not allowed; use POST", r.Method)
	}
	_, m, err := runningMirror()
	if err != nil {
		return err
	}
	rep, err := m.Sync(r.Context(), r.URL.Query().Get("deep") == "true")
	out := map[string]any{"report": rep, "status": m.Status()}
	if err != nil {
		out["error"] = err.Error()
	}
	return writeJSON(w, out)
}

// mirrorUsers names the catalog models other than except whose weights
// are the mirror's model/version (any version when a model is unpinned).
func (a *App) mirrorUsers(model, version, except string) []string {
	var out []string
	for _, m := range weights.WithAdapterSources(a.v().models) {
		if m.Name == except {
			continue
		}
		mm, mv, ok := weights.MirrorRef(m)
		if ok && mm == model && (mv == "" || version == "" || mv == version) {
			out = append(out, m.Name)
		}
	}
	return out
}

// purgeWeights removes from the mirror and the node cache the versions a
// removed model's weights came from, keeping what another model uses.
func (a *App) purgeWeights(r *http.Request, m *catalog.Model) ([]string, error) {
	if a.mirror == nil {
		return nil, nil
	}
	model, version, ok := weights.MirrorRef(m)
	if !ok {
		return nil, nil
	}
	by := r.Header.Get("X-Llmgw-Actor")
	if version != "" {
		if len(a.mirrorUsers(model, version, m.Name)) > 0 {
			return nil, nil
		}
		if _, err := a.mirror.Remove(r.Context(), model, version, by); err != nil && !errors.Is(err, mirror.ErrNotFound) {
			return nil, err
		}
		return []string{model + "/" + version}, nil
	}
	removed, err := a.mirror.Purge(r.Context(), model, by, func(v string) bool {
		return len(a.mirrorUsers(model, v, m.Name)) > 0
	})
	for i, v := range removed {
		removed[i] = model + "/" + v
	}
	return removed, err
}
