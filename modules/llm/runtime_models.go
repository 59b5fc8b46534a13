package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"reflect"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/jsonerr"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/secrets"
)

// modelsStorageKey keeps the models added through the admin API.
const modelsStorageKey = "llmgw/models.json"

func (a *App) loadRuntimeModels(ctx context.Context) ([]*catalog.Model, error) {
	if a.storage == nil {
		return nil, nil
	}
	b, err := a.storage.Load(ctx, modelsStorageKey)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading runtime models from storage: %w", err)
	}
	var ms []*catalog.Model
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("runtime models in storage (%s) are corrupt: %w", modelsStorageKey, err)
	}
	declared := map[string]bool{}
	for _, m := range a.Models {
		declared[m.Name] = true
	}
	var keep []*catalog.Model
	repl := caddy.NewReplacer()
	for _, m := range ms {
		if err := a.resolveModel(repl, m); err != nil {
			a.logger.Warn("ignoring a runtime model from storage whose values are not allowed at run time; the next change through the admin API removes it from storage",
				zap.String("model", catalog.BoundedLog(m.Name)), zap.Error(err))
			continue
		}
		if err := m.Validate(); err != nil {
			// Stored by an older llmgw that did not check it: the rest of
			// the catalog still starts.
			a.logger.Warn("ignoring a runtime model from storage that breaks the catalog's rules; the next change through the admin API removes it from storage",
				zap.String("model", catalog.BoundedLog(m.Name)), zap.Error(err))
			continue
		}
		if declared[m.Name] {
			a.logger.Warn("the config now declares a model added at runtime; the config's wins", zap.String("model", m.Name))
			continue
		}
		keep = append(keep, m)
	}
	return keep, nil
}

func (a *App) saveRuntimeModels(ctx context.Context, v *view) error {
	var ms []*catalog.Model
	for _, m := range v.models {
		if v.runtime[m.Name] {
			ms = append(ms, m)
		}
	}
	b, err := json.Marshal(ms)
	if err != nil || a.storage == nil {
		return err
	}
	return a.storage.Store(ctx, modelsStorageKey, b)
}

// runtimeOf returns the models added at runtime in v, after change.
func runtimeOf(v *view, change func([]*catalog.Model) []*catalog.Model) []*catalog.Model {
	var rt []*catalog.Model
	for _, m := range v.models {
		if v.runtime[m.Name] {
			rt = append(rt, m)
		}
	}
	return change(rt)
}

// swap makes the config's models plus runtime the catalog, saves the
// runtime ones and starts any new fleet.
func (a *App) swap(ctx context.Context, runtime []*catalog.Model) (*view, error) {
	v, err := a.buildView(append(append([]*catalog.Model{}, a.Models...), runtime...), runtime)
	if err != nil {
		return nil, apiErr(http.StatusBadRequest, "%v", err)
	}
	if err := a.saveRuntimeModels(ctx, v); err != nil {
		return nil, apiErr(http.StatusInternalServerError, "saving models to storage: %v", err)
	}
	for _, f := range v.fleets {
		f.Run()
	}
	a.view.Store(v)
	return v, nil
}

// maxModelBody bounds the body of POST /llm/models.
const maxModelBody = 1 << 20

// addModel answers POST /llm/models with a model in its JSON shape. The
// catalog's rules apply (names, the engine's options and args) and a
// model that breaks one is refused with 400; a source that fails its
// check (see SourceCheck) is refused with 422 before the catalog changes.
func (a *App) addModel(w http.ResponseWriter, r *http.Request) error {
	m, err := decodeModel(w, r)
	if err != nil {
		return err
	}
	st, err := a.addRuntime(r, m)
	if err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return writeJSON(w, st)
}

// addRuntime adds m to the catalog as POST /llm/models does.
func (a *App) addRuntime(r *http.Request, m *catalog.Model) (*llmapi.AddedModel, error) {
	if err := a.checkRuntimeModel(r.Context(), m, m.Options, m.Adapters); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.v()
	var sc *llmapi.SourceCheck
	var err error
	if _, dup := cur.cat.ByName[m.Name]; !dup && m.Validate() == nil {
		// A model the catalog refuses anyway is refused for that, with 400.
		if sc, err = a.checkSource(r.Context(), m); err != nil {
			return nil, sourceStatus(err)
		}
	}
	v, err := a.swap(r.Context(), runtimeOf(cur, func(ms []*catalog.Model) []*catalog.Model { return append(ms, m) }))
	if err != nil {
		return nil, err
	}
	a.audit(r, "model added", zap.String("model", m.Name), zap.String("engine", m.Engine), zap.String("preset", m.Preset))
	return &llmapi.AddedModel{ModelStatus: v.fleets[m.Name].Status(), SourceCheck: sc}, nil
}

// removeModel answers DELETE /llm/models/<name>.
func (a *App) removeModel(w http.ResponseWriter, r *http.Request, name string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.v()
	m, ok := cur.cat.ByName[name]
	if !ok {
		return apiErr(http.StatusNotFound, "no model %q", name)
	}
	if !cur.runtime[m.Name] {
		return apiErr(http.StatusConflict, "model %q is declared in the config file; remove it there and reload", m.Name)
	}
	for _, o := range cur.models {
		for _, fb := range o.Fallbacks {
			if o != m && cur.cat.ByName[fb] == m {
				return apiErr(http.StatusConflict, "model %q is a fallback of %q; change that first", m.Name, o.Name)
			}
		}
	}
	rt := runtimeOf(cur, func(ms []*catalog.Model) []*catalog.Model {
		var out []*catalog.Model
		for _, x := range ms {
			if x != m {
				out = append(out, x)
			}
		}
		return out
	})
	if _, err := a.swap(r.Context(), rt); err != nil {
		return err
	}
	f := cur.fleets[m.Name]
	if k := a.fkeys[m.Name]; k != "" {
		delete(a.fkeys, m.Name)
		_, _ = fleets.Delete(k) // its replicas drain
	}
	a.audit(r, "model removed", zap.String("model", m.Name))
	if err := a.presets.Declined(r.Context(), m, r.Header.Get("X-Llmgw-Actor")); err != nil { // package presets
		a.logger.Warn("a removed preset's model is not remembered as declined", zap.String("model", m.Name), zap.Error(err))
	}
	if r.URL.Query().Get("purge") != "true" {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	// The weights are purged from the node cache once no replica
	// holds them: wait for the drains.
	if f != nil {
		f.WaitDrained(r.Context())
	}
	purged, err := a.purgeWeights(r, m)
	if err != nil {
		return apiErr(http.StatusBadGateway, "model %q removed, but purging its weights failed: %v; run llmgw mirror purge when the stores answer", m.Name, err)
	}
	a.audit(r, "model weights purged", zap.String("model", m.Name), zap.Strings("versions", purged))
	return writeJSON(w, map[string]any{"removed": m.Name, "purged": purged})
}

// scaleModel answers POST /llm/models/<name>/scale with
// {"min":…,"max":…,"idle_timeout":…,"target_concurrency":…}.
func (a *App) scaleModel(w http.ResponseWriter, r *http.Request, name string) error {
	var sc catalog.Scaling
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxModelBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sc); err != nil {
		return apiErr(http.StatusBadRequest, `the body must be like {"min":1,"max":4,"idle_timeout":"10m"}: %s`, jsonerr.Describe(err))
	}
	f, err := a.changeModel(r, name, "its scaling", func(m *catalog.Model) { m.Scaling = &sc }, nil)
	if err != nil {
		return err
	}
	out, fields := llmapi.Scaled{}, []zap.Field{zap.String("model", name), zap.Int("min", sc.MinReplicas()), zap.Int("max", sc.MaxReplicas())}
	if sc.MaxReplicas() > 0 && f.Stopped() { // the scale says how many replicas it runs: it starts
		f.SetStopped(false)
		if err := a.saveStopped(r.Context()); err != nil {
			return apiErr(http.StatusInternalServerError, "model %q scaled and started, but saving that it is no longer stopped failed: %v", name, err)
		}
		n := fmt.Sprintf("%d replicas", sc.MinReplicas())
		if sc.MinReplicas() == 0 {
			n = "none until its first request"
		}
		out.Note = fmt.Sprintf("the model was stopped; the scale started it again with %s (at most %d)", n, sc.MaxReplicas())
		fields = append(fields, zap.Bool("started", true))
	}
	a.audit(r, "model scaled", fields...)
	out.ModelStatus = f.Status()
	return writeJSON(w, out)
}

// ModelSettings is the body of POST /llm/models/<name>/settings: the
// fields given replace the model's; those left out stay.
type ModelSettings struct {
	Class     *string            `json:"class,omitempty"`
	Owner     *string            `json:"owner,omitempty"`
	Fallbacks *[]string          `json:"fallbacks,omitempty"`
	Resources *catalog.Resources `json:"resources,omitempty"`
	// Canary sets the canary; {"model":"","share":0} removes it.
	Canary *catalog.Canary `json:"canary,omitempty"`
	// MaxOutput sets the most tokens one answer may have (0 removes the
	// limit), from the next request on.
	MaxOutput *int64 `json:"max_output,omitempty"`
	// ContextLength, Options and Args (with Resources) change what the
	// model's replicas run with: they are replaced without downtime (see
	// live.go). Options are merged over the model's; an empty value
	// removes one. Args replace the model's.
	ContextLength *int64            `json:"context_length,omitempty"`
	Options       map[string]string `json:"options,omitempty"`
	Args          *[]string         `json:"args,omitempty"`
	// Adapters replace the model's LoRA adapters ([] removes them all):
	// its replicas are replaced without downtime, each new one loading
	// them.
	Adapters *[]*catalog.Adapter `json:"adapters,omitempty"`
}

// setModel answers POST /llm/models/<name>/settings, for runtime and config
// models alike. Routing changes apply to the next request; class and
// resources to the next placement. Replicas keep running.
func (a *App) setModel(w http.ResponseWriter, r *http.Request, name string) error {
	var st ModelSettings
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxModelBody))
	if err != nil {
		return apiErr(http.StatusBadRequest, "reading the settings: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonerr.Lenient(body, reflect.TypeOf(st)))) // an option's 50 is "50"
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return apiErr(http.StatusBadRequest, `the body must be like {"class":"critical","owner":"acme/research","fallbacks":["b"],"canary":{"model":"m2","share":0.1}}: %s`, jsonerr.Describe(err))
	}
	var adapters []*catalog.Adapter
	if st.Adapters != nil {
		adapters = *st.Adapters
	}
	if err := a.checkRuntimeModel(r.Context(), nil, st.Options, adapters); err != nil {
		return err
	}
	if st.Adapters != nil {
		if err := a.checkNewAdapters(r.Context(), name, *st.Adapters); err != nil {
			return sourceStatus(err)
		}
	}
	f, err := a.changeModel(r, name, "its settings", st.apply, &st)
	if err != nil {
		return err
	}
	logged := st
	logged.Options = secrets.MaskOptions(st.Options) // credentials never reach the audit log
	b, _ := json.Marshal(logged)
	if !st.reshapes() {
		a.audit(r, "model settings changed", zap.String("model", name), zap.ByteString("settings", b))
		return writeJSON(w, f.Status())
	}
	a.audit(r, "model changed live", zap.String("model", name), zap.ByteString("settings", b))
	note := ""
	if !a.v().runtime[f.Model().Name] {
		note = "the model is declared in the config file: the change is kept in Caddy storage and laid over the file's values at every start and reload; the file still holds the old values"
	}
	const reason = "its model changed (context length, resources, options, args or adapters)"
	if a.cluster != nil {
		return a.rollClusterAnswer(w, r, f.Model(), f, reason, note)
	}
	return a.rollModel(w, r, f, reason, note)
}

// changeModel applies change to a copy of a model, checks the whole
// catalog with it, stores it and hands it to the model's fleet (which keeps
// its replicas). A config model takes only settings (st): they are kept in
// Caddy storage and laid over the config's model at every start and reload;
// other changes to it are made in the file.
func (a *App) changeModel(r *http.Request, name, what string, change func(*catalog.Model), st *ModelSettings) (*fleet.Fleet, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.v()
	m, ok := cur.cat.ByName[name]
	if !ok {
		return nil, apiErr(http.StatusNotFound, "no model %q", name)
	}
	fromConfig := !cur.runtime[m.Name]
	if fromConfig && st == nil {
		return nil, apiErr(http.StatusConflict, "model %q is declared in the config file; change %s there and reload", m.Name, what)
	}
	next := *m
	change(&next)
	if err := next.Validate(); err != nil {
		return nil, apiErr(http.StatusBadRequest, "%v", err)
	}
	if st != nil && st.reshapes() {
		if _, err := catalog.NewCatalog(swapModel(cur.models, m, &next)); err != nil {
			return nil, apiErr(http.StatusBadRequest, "%v", err)
		}
		if err := a.checkReshape(m, &next, cur.fleets[m.Name]); err != nil {
			return nil, err
		}
	}
	swapIn := func(ms []*catalog.Model) []*catalog.Model {
		out := make([]*catalog.Model, len(ms))
		for i, x := range ms {
			out[i] = x
			if x == m {
				out[i] = &next
			}
		}
		return out
	}
	before := a.Models
	if fromConfig {
		a.Models = swapIn(a.Models)
	}
	v, err := a.swap(r.Context(), runtimeOf(cur, swapIn))
	if err != nil {
		a.Models = before
		return nil, err
	}
	if fromConfig {
		if err := a.saveSettings(r.Context(), m.Name, *st); err != nil {
			return nil, apiErr(http.StatusInternalServerError, "saving the model's settings: %v", err)
		}
	}
	f := v.fleets[next.Name]
	f.SetModel(&next)
	if st != nil && st.reshapes() {
		a.rekey(f, &next)
	}
	f.Kick()
	return f, nil
}

// settingsStorageKey keeps settings changed through the admin API on
// models declared in the config file.
const settingsStorageKey = "llmgw/model-settings.json"

func (a *App) loadSettings(ctx context.Context) (map[string]ModelSettings, error) {
	out := map[string]ModelSettings{}
	if a.storage == nil {
		return out, nil
	}
	b, err := a.storage.Load(ctx, settingsStorageKey)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("loading model settings from storage: %w", err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("model settings in storage (%s) are corrupt: %w", settingsStorageKey, err)
	}
	return out, nil
}

// saveSettings merges st into the stored settings of a config model.
func (a *App) saveSettings(ctx context.Context, name string, st ModelSettings) error {
	all, err := a.loadSettings(ctx)
	if err != nil {
		return err
	}
	all[name] = all[name].merge(st)
	b, _ := json.Marshal(all)
	if a.storage == nil {
		return nil
	}
	return a.storage.Store(ctx, settingsStorageKey, b)
}

// applySettings lays the stored settings over the config's models.
func (a *App) applySettings(ctx context.Context) error {
	all, err := a.loadSettings(ctx)
	if err != nil || len(all) == 0 {
		return err
	}
	models := make([]*catalog.Model, len(a.Models))
	repl := caddy.NewReplacer()
	for i, m := range a.Models {
		models[i] = m
		if st, ok := all[m.Name]; ok {
			next := *m
			st.apply(&next)
			if err := a.resolveModel(repl, &next); err != nil {
				a.logger.Warn("ignoring settings from storage whose values are not allowed at run time; change them through the admin API",
					zap.String("model", m.Name), zap.Error(err))
				continue
			}
			models[i] = &next
			a.logger.Info("settings changed through the admin API apply over the config", zap.String("model", m.Name))
		}
	}
	a.Models = models
	return nil
}

// merge lays o's fields over s's.
func (s ModelSettings) merge(o ModelSettings) ModelSettings {
	if o.Class != nil {
		s.Class = o.Class
	}
	if o.Owner != nil {
		s.Owner = o.Owner
	}
	if o.Fallbacks != nil {
		s.Fallbacks = o.Fallbacks
	}
	if o.Resources != nil {
		s.Resources = o.Resources
	}
	if o.Canary != nil {
		s.Canary = o.Canary
	}
	if o.MaxOutput != nil {
		s.MaxOutput = o.MaxOutput
	}
	if o.ContextLength != nil {
		s.ContextLength = o.ContextLength
	}
	if o.Args != nil {
		s.Args = o.Args
	}
	if o.Adapters != nil {
		s.Adapters = o.Adapters
	}
	if o.Options != nil {
		opts := catalog.CloneOptions(s.Options)
		for k, v := range o.Options {
			opts[k] = v // an empty value is kept: it removes the file's option
		}
		s.Options = opts
	}
	return s
}

// apply sets the given fields on m; a canary with no model removes it.
func (s ModelSettings) apply(m *catalog.Model) {
	if s.Class != nil {
		m.Class = *s.Class
	}
	if s.Owner != nil {
		m.Owner = *s.Owner
	}
	if s.Fallbacks != nil {
		m.Fallbacks = *s.Fallbacks
	}
	if s.Resources != nil {
		m.Resources = s.Resources
	}
	if s.Canary != nil {
		m.Canary = s.Canary
		if s.Canary.Model == "" {
			m.Canary = nil
		}
	}
	if s.ContextLength != nil {
		m.ContextLength = *s.ContextLength
	}
	if s.MaxOutput != nil {
		m.MaxOutput = *s.MaxOutput
	}
	if s.Args != nil {
		m.Args = *s.Args
	}
	if s.Adapters != nil {
		m.Adapters = *s.Adapters
	}
	if s.Options != nil {
		opts := catalog.CloneOptions(m.Options)
		for k, v := range s.Options {
			if v == "" {
				delete(opts, k)
			} else {
				opts[k] = v
			}
		}
		m.Options = opts
	}
}

// swapModel returns models with m replaced by next.
func swapModel(models []*catalog.Model, m, next *catalog.Model) []*catalog.Model {
	out := make([]*catalog.Model, len(models))
	for i, x := range models {
		out[i] = x
		if x == m {
			out[i] = next
		}
	}
	return out
}
