// Package anthropic is the engine for Anthropic's API and providers that
// serve the Anthropic Messages API. Its replica is the provider's
// endpoint: Start validates the settings and returns the base URL, the
// key and version headers, and the provider's model name for the gateway
// to put in request bodies. It runs no process. The gateway sends
// Messages requests through unchanged (prompt caching fields included)
// and translates chat completions and Responses requests to Messages.
package anthropic

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the anthropic engine.
const Version = "0.1.0"

// Defaults for the options.
const (
	DefaultBaseURL = "https://api.anthropic.com/v1"
	DefaultVersion = "2023-06-01"
)

// Engine implements engine.Engine for Anthropic-compatible providers.
type Engine struct {
	engine.Remote // Status, Adopt, Stop
}

// New returns the engine.
func New() *Engine { return &Engine{} }

// info is the engine's description. It runs no process, so no flag is
// reserved.
var info = engine.Info{Type: "anthropic", Version: Version, Protocol: engine.ProtocolVersion,
	Capabilities: []string{engine.CapMessages},
	Formats:      []string{"remote"},
	Options: []engine.Option{
		{Name: "base_url", Description: "the provider's API; default " + DefaultBaseURL},
		{Name: "api_key", Secret: true, Description: "sent as x-api-key; several keys separated by commas are used in turn, moving on when the provider answers 401 or 429; in the config file use a placeholder such as {env.ANTHROPIC_API_KEY}; added at run time, the key itself or secret:NAME (a secret the config declares), never shown back"},
		{Name: "version", Description: "sent as anthropic-version; default " + DefaultVersion},
		{Name: "beta", Description: "sent as anthropic-beta, such as a comma-separated list of beta features; default: none"},
		{Name: "model", Description: "the provider's name for the model, such as claude-sonnet-4-5; default: the catalog name"},
		engine.ProbeIntervalOption,
	},
	Example: `name: claude-sonnet
engine: anthropic
options:
  api_key: secret:anthropic_key # a secret the config declares, or the key itself
  model: claude-sonnet-4-5
scaling:
  min: 1
  max: 1
`,
}

// Info describes the engine.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	return info, nil
}

// Start checks the provider settings and returns the replica: the base
// URL and the x-api-key, anthropic-version and anthropic-beta headers.
func (e *Engine) Start(_ context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	if err := info.CheckOptions(spec.Options); err != nil {
		return engine.Replica{}, err
	}
	if len(spec.Args) > 0 {
		return engine.Replica{}, fmt.Errorf("model %q: the anthropic engine runs no server, so args mean nothing to it; remove them", spec.Model)
	}
	base := strings.TrimRight(spec.Options["base_url"], "/")
	if base == "" {
		base = DefaultBaseURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return engine.Replica{}, fmt.Errorf("model %q: base_url %q is not an http(s) URL; use one such as %s", spec.Model, base, DefaultBaseURL)
	}
	if u.RawQuery != "" || strings.HasSuffix(u.Path, "/messages") {
		return engine.Replica{}, fmt.Errorf("model %q: base_url %q must be the API's base, such as %s, without /messages or a query", spec.Model, base, DefaultBaseURL)
	}
	version := spec.Options["version"]
	if version == "" {
		version = DefaultVersion
	}
	headers := map[string]string{"anthropic-version": version}
	if k := spec.Options["api_key"]; k != "" {
		headers["x-api-key"] = engine.Alternatives(engine.SplitKeys(k))
	}
	if b := spec.Options["beta"]; b != "" {
		headers["anthropic-beta"] = b
	}
	rep := engine.Replica{ID: spec.ReplicaID, BaseURL: base, Headers: headers, UpstreamModel: spec.Options["model"]}
	interval, err := engine.ProbeInterval(spec.Options)
	if err != nil {
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	e.Watch(spec.ReplicaID, engine.ProbeFor(rep, interval))
	return rep, nil
}
