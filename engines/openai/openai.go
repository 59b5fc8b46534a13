// Package openai is the engine for outside OpenAI-compatible providers. Its
// replica is the provider's endpoint: Start validates the settings and
// returns the base URL, the key as a header, and the provider's model name
// for the gateway to put in request bodies. It runs no process.
package openai

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the openai engine.
const Version = "0.1.0"

// Engine implements engine.Engine for outside providers.
type Engine struct {
	mu       sync.Mutex
	replicas map[string]struct{}
}

// New returns the engine.
func New() *Engine { return &Engine{replicas: make(map[string]struct{})} }

// Info describes the engine.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	return info, nil
}

// info is the engine's description. It runs no process, so no flag is
// reserved.
var info = engine.Info{Type: "openai", Version: Version, Protocol: engine.ProtocolVersion,
	Capabilities: []string{engine.CapChat, engine.CapCompletions, engine.CapEmbeddings},
	Formats:      []string{"remote"},
	Options: []engine.Option{
		{Name: "base_url", Description: "the provider's API, such as https://api.openai.com/v1 (required)"},
		{Name: "api_key", Description: "sent as Authorization: Bearer; use a placeholder such as {env.OPENAI_API_KEY}"},
		{Name: "model", Description: "the provider's name for the model; default: the catalog name"},
	},
}

// Start checks the provider settings. Options: base_url (required, e.g.
// https://api.example.com/v1), api_key, model (the provider's name for
// the model; default the catalog name).
func (e *Engine) Start(_ context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	base := strings.TrimRight(spec.Options["base_url"], "/")
	if base == "" {
		return engine.Replica{}, fmt.Errorf("model %q: the openai engine needs option base_url, such as https://api.openai.com/v1", spec.Model)
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return engine.Replica{}, fmt.Errorf("model %q: base_url %q is not an http(s) URL", spec.Model, base)
	}
	if err := info.CheckOptions(spec.Options); err != nil {
		return engine.Replica{}, err
	}
	if len(spec.Args) > 0 {
		return engine.Replica{}, fmt.Errorf("model %q: the openai engine runs no server, so args mean nothing to it; remove them", spec.Model)
	}
	rep := engine.Replica{ID: spec.ReplicaID, BaseURL: base, UpstreamModel: spec.Options["model"]}
	if k := spec.Options["api_key"]; k != "" {
		rep.Headers = map[string]string{"Authorization": "Bearer " + k}
	}
	e.mu.Lock()
	e.replicas[spec.ReplicaID] = struct{}{}
	e.mu.Unlock()
	return rep, nil
}

// Status reports an outside provider as ready; the gateway learns of its
// failures from the requests it sends.
func (e *Engine) Status(_ context.Context, id string) (engine.Status, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.replicas[id]; !ok {
		return engine.Status{}, engine.ErrUnknownReplica
	}
	return engine.Status{State: engine.StateReady}, nil
}

// Adopt takes back a replica (an outside provider's endpoint) after the
// plugin restarted.
func (e *Engine) Adopt(_ context.Context, r engine.Replica) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.replicas == nil {
		e.replicas = map[string]struct{}{}
	}
	e.replicas[r.ID] = struct{}{}
	return nil
}

// Stop forgets a replica.
func (e *Engine) Stop(_ context.Context, id string, _ time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.replicas[id]; !ok {
		return engine.ErrUnknownReplica
	}
	delete(e.replicas, id)
	return nil
}
