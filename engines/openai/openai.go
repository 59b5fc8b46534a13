// Package openai is the engine for outside OpenAI-compatible providers,
// Azure OpenAI included. Its replica is the provider's endpoint: Start
// validates the settings and returns the base URL, the key as a header,
// and the provider's model name for the gateway to put in request bodies.
// It runs no process.
//
// Azure OpenAI's deployment API is options azure_deployment and
// api_version: the replica's base URL is then
// <base_url>/openai/deployments/<deployment>?api-version=<version> (the
// gateway puts the endpoint's path before the query) and the key goes in
// an api-key header. Azure's v1 API needs only base_url
// https://<resource>.openai.azure.com/openai/v1; its key also goes in
// api-key.
package openai

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the openai engine.
const Version = "0.1.0"

// Engine implements engine.Engine for outside providers.
type Engine struct {
	engine.Remote // Status, Adopt, Stop
}

// New returns the engine.
func New() *Engine { return &Engine{} }

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
		{Name: "base_url", Required: true, Example: "https://api.openai.com/v1", Description: "the provider's API, such as https://api.openai.com/v1 (required)"},
		{Name: "api_key", Secret: true, Description: "sent as Authorization: Bearer (or in api_key_header); several keys separated by commas are used in turn, moving on when the provider answers 401 or 429; in the config file use a placeholder such as {env.OPENAI_API_KEY}; added at run time, the key itself or secret:NAME (a secret the config declares), never shown back"},
		{Name: "speaks", Description: "APIs the provider serves itself besides chat completions, such as responses (OpenAI does): requests in them pass through unchanged when nothing in the gateway needs their chat form; default: none, they are translated"},
		{Name: "model", Description: "the provider's name for the model; default: the catalog name"},
		{Name: "azure_deployment", Description: "Azure OpenAI: the deployment's name; base_url is then the resource's URL, such as https://<resource>.openai.azure.com, and api_version is required"},
		{Name: "api_version", Description: "Azure OpenAI: sent as the api-version query parameter, such as 2024-10-21; default: none"},
		{Name: "api_key_header", Description: "the header that carries api_key: Authorization (as Bearer <key>) or another name, such as api-key (the key alone); default: api-key for Azure (azure_deployment set, or a host under .azure.com), else Authorization"},
		engine.ProbeIntervalOption,
	},
	Example: `name: gpt-4o-mini
engine: openai
options:
  base_url: https://api.openai.com/v1
  api_key: secret:openai_key # a secret the config declares, or the key itself
  model: gpt-4o-mini
scaling:
  min: 1
  max: 1
`,
}

// Start checks the provider settings. Options: base_url (required, e.g.
// https://api.example.com/v1), api_key, model (the provider's name for
// the model; default the catalog name), and for Azure OpenAI
// azure_deployment, api_version and api_key_header.
func (e *Engine) Start(_ context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	if err := info.CheckOptions(spec.Options); err != nil {
		return engine.Replica{}, err
	}
	if len(spec.Args) > 0 {
		return engine.Replica{}, fmt.Errorf("model %q: the openai engine runs no server, so args mean nothing to it; remove them", spec.Model)
	}
	base, azure, err := baseURL(spec.Options)
	if err != nil {
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	rep := engine.Replica{ID: spec.ReplicaID, BaseURL: base, UpstreamModel: spec.Options["model"]}
	if k := spec.Options["api_key"]; k != "" {
		h := spec.Options["api_key_header"]
		switch {
		case h == "" && azure:
			h = "api-key"
		case h == "":
			h = "Authorization"
		case !validHeader(h):
			return engine.Replica{}, fmt.Errorf("model %q: api_key_header %q is not a header name; use Authorization or api-key", spec.Model, h)
		}
		keys := engine.SplitKeys(k)
		if strings.EqualFold(h, "Authorization") {
			for i := range keys {
				keys[i] = "Bearer " + keys[i]
			}
		}
		rep.Headers = map[string]string{h: engine.Alternatives(keys)}
	}
	interval, err := engine.ProbeInterval(spec.Options)
	if err != nil {
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	e.Watch(spec.ReplicaID, engine.ProbeFor(rep, interval))
	return rep, nil
}

// baseURL is the replica's base URL from base_url and, for Azure's
// deployment API, azure_deployment and api_version. azure reports an Azure
// endpoint, whose key goes in api-key by default.
func baseURL(opts map[string]string) (base string, azure bool, err error) {
	base = strings.TrimRight(opts["base_url"], "/")
	dep, ver := opts["azure_deployment"], opts["api_version"]
	if base == "" {
		if dep != "" {
			return "", false, fmt.Errorf("azure_deployment needs base_url, the resource's URL, such as https://<resource>.openai.azure.com")
		}
		return "", false, fmt.Errorf("the openai engine needs option base_url, such as https://api.openai.com/v1")
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false, fmt.Errorf("base_url %q is not an http(s) URL", base)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", false, fmt.Errorf("base_url %q has a query; set the api-version with option api_version instead", base)
	}
	azure = strings.HasSuffix(strings.ToLower(u.Hostname()), ".azure.com")
	path := strings.TrimSuffix(u.Path, "/openai")
	switch {
	case dep != "" && strings.Contains(u.Path, "/deployments/"):
		return "", false, fmt.Errorf("base_url %q already names a deployment; give the resource's URL, such as https://<resource>.openai.azure.com, and the deployment as azure_deployment", base)
	case dep != "" && path != "":
		return "", false, fmt.Errorf("base_url %q with azure_deployment must be the resource's URL, such as https://<resource>.openai.azure.com; for Azure's v1 API (…/openai/v1) leave azure_deployment and api_version out and set model to the deployment's name", base)
	case dep != "" && ver == "":
		return "", false, fmt.Errorf("azure_deployment %q needs api_version, the Azure OpenAI API version, such as 2024-10-21", dep)
	case dep == "" && azure && path == "":
		return "", false, fmt.Errorf("base_url %q is an Azure OpenAI resource: set azure_deployment and api_version, or use its v1 API with base_url %s/openai/v1", base, strings.TrimSuffix(base, "/openai"))
	}
	if dep != "" {
		azure = true
		base = u.Scheme + "://" + u.Host + "/openai/deployments/" + url.PathEscape(dep)
	}
	if ver != "" {
		base += "?api-version=" + url.QueryEscape(ver)
	}
	return base, azure, nil
}

// validHeader reports whether h is an HTTP header name (RFC 9110 token).
func validHeader(h string) bool {
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", c)) {
			return false
		}
	}
	return h != ""
}
