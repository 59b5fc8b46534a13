package presets

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// DeclinesKey keeps the declined presets in the app's storage.
const DeclinesKey = "llmgw/presets-declined.json"

// Host is what a Service needs of the llm app.
type Host interface {
	// Models is the catalog now.
	Models() []*catalog.Model
	// WhyNot says why the cluster cannot run m now (its engine, the
	// room on the nodes); none when it can.
	WhyNot(ctx context.Context, m *catalog.Model) []string
	// Add adds m to the catalog as POST /llm/models does, audited as
	// done by r's actor; the answer is the added model's status.
	Add(r *http.Request, m *catalog.Model) (*llmapi.AddedModel, error)
	// Load reads a key of the app's storage (nil when absent); Store
	// writes one.
	Load(ctx context.Context, key string) ([]byte, error)
	Store(ctx context.Context, key string, b []byte) error
}

// Service is the presets of one config of the llm app.
type Service struct {
	list    []*Preset
	shipped map[string]bool
	host    Host
	logger  *zap.Logger
	mu      sync.Mutex // one change of the declines at a time
}

// NewService checks the operator's presets and lists them with the
// shipped ones.
func NewService(own []*Preset, host Host, logger *zap.Logger) (*Service, error) {
	s := &Service{host: host, logger: logger, shipped: map[string]bool{}}
	shipped := Shipped()
	for _, p := range shipped {
		s.shipped[p.Name] = true
	}
	for _, p := range own {
		if err := p.Check(); err != nil {
			return nil, err
		}
		delete(s.shipped, p.Name)
	}
	s.list = Merge(shipped, own)
	return s, nil
}

// Named is the preset called name, or nil.
func (s *Service) Named(name string) *Preset {
	for _, p := range s.list {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// declines reads the declined presets from storage.
func (s *Service) declines(ctx context.Context) (Declines, error) {
	b, err := s.host.Load(ctx, DeclinesKey)
	if err != nil {
		return nil, fmt.Errorf("reading the declined presets: %w", err)
	}
	return ParseDeclines(b)
}

// changeDeclines applies change to the declines kept in storage.
func (s *Service) changeDeclines(ctx context.Context, change func(Declines) Declines) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.declines(ctx)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(change(d))
	return s.host.Store(ctx, DeclinesKey, b)
}

// Declined records that an operator removed m: if it came from a preset,
// the preset is not added again by itself.
func (s *Service) Declined(ctx context.Context, m *catalog.Model, by string) error {
	if m.Preset == "" || s.Named(m.Preset) == nil {
		return nil
	}
	return s.changeDeclines(ctx, func(d Declines) Declines {
		return d.With(Decline{Preset: m.Preset, Model: m.Name, By: by, At: time.Now().UTC()})
	})
}

// Status is every preset as GET /llm/presets shows it.
func (s *Service) Status(ctx context.Context) ([]llmapi.PresetStatus, error) {
	d, err := s.declines(ctx)
	if err != nil {
		return nil, err
	}
	models := s.host.Models()
	out := make([]llmapi.PresetStatus, 0, len(s.list))
	for _, p := range s.list {
		out = append(out, s.status(ctx, p, models, d))
	}
	return out, nil
}

// status is one preset's status.
func (s *Service) status(ctx context.Context, p *Preset, models []*catalog.Model, d Declines) llmapi.PresetStatus {
	m := p.ModelNamed("")
	st := llmapi.PresetStatus{Name: p.Name, Description: p.Description, Kind: p.Kind, Engine: m.Engine, Source: m.Source,
		Resources: m.Resources, Licence: m.Licence, Automatic: p.Automatic, Shipped: s.shipped[p.Name], Workflows: []llmapi.PresetWorkflow{}}
	for _, w := range m.Workflows {
		st.Workflows = append(st.Workflows, llmapi.PresetWorkflow{Name: w.Name, Description: w.Description, Parameters: w.ParamNames()})
	}
	if added := addedFrom(p, models); added != "" {
		st.State, st.Model = "added", added
		return st
	}
	st.WhyNot = s.host.WhyNot(ctx, m)
	for _, x := range d {
		if x.Preset == p.Name {
			at := x.At
			st.State, st.DeclinedBy, st.DeclinedAt = "declined", x.By, &at
			return st
		}
	}
	st.State = "available"
	if len(st.WhyNot) > 0 {
		st.State = "unavailable"
	}
	return st
}

// addedFrom is the catalog model added from p ("" for none): one marked
// with it, else one with its name.
func addedFrom(p *Preset, models []*catalog.Model) string {
	for _, m := range models {
		if m.Preset == p.Name {
			return m.Name
		}
	}
	for _, m := range models {
		if m.Name == p.Name {
			return m.Name
		}
	}
	return ""
}

// apiErr is an admin API error.
func apiErr(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// AddRequest is the body of POST /llm/presets/{name}/add.
type AddRequest struct {
	// Name of the model; default the preset's.
	Name string `json:"name,omitempty"`
}

// Add answers POST /llm/presets/{name}/add: the preset's model joins the
// catalog (checked as any added model is), and the preset is no longer
// declined.
func (s *Service) Add(w http.ResponseWriter, r *http.Request, name string) error {
	p := s.Named(name)
	if p == nil {
		return apiErr(http.StatusNotFound, "no preset %s; llmgw ctl model presets lists them", catalog.Bounded(name))
	}
	var body AddRequest
	if raw, _ := io.ReadAll(io.LimitReader(r.Body, 4096)); len(raw) > 0 {
		// Only the name: what a preset's model runs is the preset's.
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if dec.Decode(&body) != nil {
			return apiErr(http.StatusBadRequest, `the body must be JSON like {"name":"my-model"} (the model's name, nothing else), or empty for the preset's name`)
		}
	}
	m := p.ModelNamed(body.Name)
	for _, o := range s.host.Models() {
		if o.Name == m.Name || (body.Name == "" && o.Preset == p.Name) {
			return apiErr(http.StatusConflict, "the catalog already has model %s (from preset %s); give another name: llmgw ctl model add --preset %s --name <model>", o.Name, p.Name, p.Name)
		}
	}
	st, err := s.host.Add(r, m)
	if err != nil {
		return err
	}
	if err := s.changeDeclines(r.Context(), func(d Declines) Declines { return d.Without(p.Name) }); err != nil {
		s.logger.Warn("a preset added again is still listed as declined", zap.String("preset", p.Name), zap.Error(err))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	return json.NewEncoder(w).Encode(st)
}

// ServeHTTP answers /llm/presets and what is under it.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	rest := strings.Trim(strings.TrimPrefix(r.URL.Path, "/llm/presets"), "/")
	name, action, _ := strings.Cut(rest, "/")
	switch {
	case rest == "" && r.Method == http.MethodGet:
		st, err := s.Status(r.Context())
		if err != nil {
			return apiErr(http.StatusServiceUnavailable, "%v", err)
		}
		return writeJSON(w, st)
	case action == "" && name != "" && r.Method == http.MethodGet:
		return s.one(w, r, name)
	case action == "add" && r.Method == http.MethodPost:
		return s.Add(w, r, name)
	}
	return apiErr(http.StatusMethodNotAllowed, "%s %s: use GET /llm/presets, GET /llm/presets/{name} or POST /llm/presets/{name}/add", r.Method, catalog.Bounded(r.URL.Path))
}

// one answers GET /llm/presets/{name}: its status and its whole model.
func (s *Service) one(w http.ResponseWriter, r *http.Request, name string) error {
	p := s.Named(name)
	if p == nil {
		return apiErr(http.StatusNotFound, "no preset %s; llmgw ctl model presets lists them", catalog.Bounded(name))
	}
	d, err := s.declines(r.Context())
	if err != nil {
		return apiErr(http.StatusServiceUnavailable, "%v", err)
	}
	return writeJSON(w, struct {
		llmapi.PresetStatus
		Definition *catalog.Model `json:"definition"`
	}{s.status(r.Context(), p, s.host.Models(), d), p.ModelNamed("")})
}

func writeJSON(w http.ResponseWriter, v any) error {
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(v)
}

// Run adds the automatic presets the cluster can run, now and then every
// period, until ctx ends; declined ones and those added stay as they are.
func (s *Service) Run(ctx context.Context, first, period time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.addAutomatic(ctx)
		t.Reset(period)
	}
}

// addAutomatic adds each automatic preset that is not added, not declined
// and that the cluster can run.
func (s *Service) addAutomatic(ctx context.Context) {
	d, err := s.declines(ctx)
	if err != nil {
		s.logger.Warn("automatic presets not checked", zap.Error(err))
		return
	}
	var added, declined []string
	defer func() {
		s.logger.Info("automatic presets checked", zap.Strings("added", added), zap.Strings("declined", declined))
	}()
	for _, p := range s.list {
		if p.Automatic && d.Has(p.Name) {
			declined = append(declined, p.Name)
		}
		if !p.Automatic || d.Has(p.Name) || addedFrom(p, s.host.Models()) != "" {
			continue
		}
		m := p.ModelNamed("")
		if why := s.host.WhyNot(ctx, m); len(why) > 0 {
			s.logger.Debug("automatic preset not added", zap.String("preset", p.Name), zap.Strings("why_not", why))
			continue
		}
		r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/llm/presets/"+p.Name+"/add", nil)
		r.Header.Set("X-Llmgw-Actor", "llmgw (automatic preset)")
		if _, err := s.host.Add(r, m); err != nil && !errors.Is(err, context.Canceled) {
			s.logger.Warn("adding an automatic preset", zap.String("preset", p.Name), zap.Error(err))
			continue
		}
		added = append(added, p.Name)
	}
}
