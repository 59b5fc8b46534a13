// Package engine is the engine plugin protocol: a plain Go Engine interface
// that every engine plugin implements, the versioned go-plugin handshake,
// and Serve, which a plugin's main calls. The protobuf messages and their
// converters are internal; nothing here exposes them.
//
// Plugins are control only. A replica is an engine server on a loopback
// port (or an outside provider's endpoint), and the gateway sends requests
// to its BaseURL directly over HTTP.
package engine

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hashicorp/go-plugin"
)

// ProtocolVersion is the newest protocol version this package speaks.
const ProtocolVersion = 1

// PluginName is the name under which the engine is dispensed.
const PluginName = "engine"

// Handshake is shared by the gateway and every engine plugin. It is not a
// security measure; it keeps an engine binary from being run by hand by
// mistake and tells both sides they speak this protocol.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "LLMGW_ENGINE_PLUGIN",
	MagicCookieValue: "d8c1f0a4-engine-plugin",
}

// VersionedPlugins maps each protocol version to the plugins it offers.
func VersionedPlugins(impl Engine) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{
		1: {PluginName: &GRPCPlugin{Impl: impl}},
	}
}

// Capabilities an engine can report.
const (
	CapChat        = "chat"
	CapCompletions = "completions"
	CapEmbeddings  = "embeddings"
	CapAdapters    = "adapters"
	// CapResponses: the engine's server serves OpenAI's Responses API
	// (POST /responses) itself.
	CapResponses = "responses"
	// CapMessages: the engine's server serves Anthropic's Messages API
	// (POST /messages) itself.
	CapMessages = "messages"
	// CapComfyUI: the engine's server speaks ComfyUI's HTTP and WebSocket
	// API (/prompt, /history, /view, /ws …): it runs workflows, not chats.
	CapComfyUI = "comfyui"
)

// Replica states reported by Status.
const (
	StateStarting = "starting"
	StateReady    = "ready"
	StateFailed   = "failed"
	StateExited   = "exited"
	// StateFailing: the replica exists but does not serve now (an outside
	// provider that does not answer, or refuses its key); Message says
	// why. The gateway keeps it, sends it no request, and uses it again
	// once Status says ready. Gateways older than this state took it for
	// ready.
	StateFailing = "failing"
	StateUnknown = "unknown"
)

// ErrUnknownReplica is returned by Status and Stop for an id the engine
// does not supervise (for instance after the plugin was restarted).
var ErrUnknownReplica = errors.New("unknown replica")

// Engine is what an engine plugin implements. All methods take a context
// first and must be safe for concurrent use.
type Engine interface {
	// Info describes the engine.
	Info(ctx context.Context) (Info, error)
	// Start starts one replica and returns once its server is reachable
	// or has failed. A replica still loading reports StateStarting.
	Start(ctx context.Context, spec ReplicaSpec) (Replica, error)
	// Status reports the state of one replica.
	Status(ctx context.Context, id string) (Status, error)
	// Stop stops one replica, giving it grace to finish in-flight work.
	Stop(ctx context.Context, id string, grace time.Duration) error
}

// Info describes an engine type.
type Info struct {
	Type         string   `json:"type"`
	Version      string   `json:"version"`
	Protocol     int      `json:"protocol"`
	Capabilities []string `json:"capabilities,omitempty"`
	Formats      []string `json:"formats,omitempty"`
	// Options a model may set for this engine. The gateway refuses a
	// model with another option, or with a value not of the option's type,
	// when it loads the config. Empty: options are not declared and not
	// checked (plugins written before options were declared).
	Options []Option `json:"options,omitempty"`
	// ReservedArgs are the engine server's flags that a model's args must
	// not carry: those that set its listen address, port or socket, which
	// the engine chooses (always on loopback). Each is written as the
	// server spells it ("--host", "-listen"); CheckArgs also refuses the
	// "--host=x" form and, for "--" flags, abbreviations such as "--ho"
	// (Python's argparse accepts them).
	ReservedArgs []string `json:"reserved_args,omitempty"`
	// ArgFlags, when set, are the only flags a model's args may carry
	// (values after them are not checked). Empty: any flag not reserved.
	ArgFlags []string `json:"arg_flags,omitempty"`
	// Example is a model of this engine, as YAML (the admin API's model
	// shape), shown to operators who add one.
	Example string `json:"example,omitempty"`
}

// Option is one engine-specific model option.
type Option struct {
	// Name of the option; a trailing * names a family (param_* is
	// param_temperature, param_stop …).
	Name string `json:"name"`
	// Type of its value: one of the Type* constants. Empty: any string.
	Type string `json:"type,omitempty"`
	// Description for operators: what it does, its default.
	Description string `json:"description,omitempty"`
	// Required: a model of this engine must set it; the gateway refuses
	// one without it when it is added or loaded.
	Required bool `json:"required,omitempty"`
	// Secret: its value is a credential (a key). The gateway never shows
	// it back, and forms ask for it in a password field.
	Secret bool `json:"secret,omitempty"`
	// Example is a value to show, such as https://api.openai.com/v1.
	Example string `json:"example,omitempty"`
}

// Option value types.
const (
	TypeString   = "string"
	TypeInteger  = "integer"  // a whole number, such as 8 or -1
	TypeNumber   = "number"   // such as 0.9 or 20
	TypeBool     = "bool"     // true or false
	TypeDuration = "duration" // a Go duration, such as 250ms or 2s
)

// ReplicaSpec is what a replica is started from.
type ReplicaSpec struct {
	Model         string            // catalog name
	ReplicaID     string            // chosen by the gateway, unique
	Source        string            // weights: path or URL
	Args          []string          // extra arguments for the engine server
	Options       map[string]string // engine-specific settings
	ContextLength int64
	Concurrency   int64 // requests a replica should serve at once
	// What the model says one replica needs (0 = not said): engines size
	// threads and GPU splits from them.
	Memory int64
	Cores  int
	GPUs   int
	// CPUs are the cores the gateway gave this replica (its node pins
	// cores): the engine's processes are to run only on them, so that
	// nothing else on the node preempts its compute threads. Empty: run
	// wherever the kernel puts them.
	CPUs []int

	// GPUDevices are the GPUs the gateway gave this replica, as indexes
	// the way CUDA_VISIBLE_DEVICES names them; no other replica on the
	// node holds them. A local engine runs its server with
	// CUDA_VISIBLE_DEVICES (and the ROCm equivalents) set to them, see
	// VisibleDevicesEnv. Empty: the model asks for no GPUs, or the gateway
	// does not hand them out (an older gateway): the engine's own choice.
	GPUDevices []int
	// Adapters are LoRA adapters the replica loads beside the model, each
	// served under its own name: a request whose model is an adapter's
	// name is answered with the adapter applied, other requests by the
	// model alone. An engine that cannot serve them fails Start.
	Adapters []Adapter
}

// Adapter is a LoRA adapter a replica loads.
type Adapter struct {
	Name  string  // what clients ask for; unique in the catalog
	Path  string  // the adapter's file on this node
	Scale float64 // how strongly it applies; 0 means 1
}

// ScaleOr1 is the adapter's scale, 1 when not set.
func (a Adapter) ScaleOr1() float64 {
	if a.Scale == 0 {
		return 1
	}
	return a.Scale
}

// Replica is a started replica.
type Replica struct {
	ID      string
	BaseURL string // e.g. http://127.0.0.1:41234/v1
	PID     int64  // 0 when the replica is not a local process
	// Headers are added to every request sent to the replica (an outside
	// provider's key, for instance). A value of several lines is a list of
	// alternatives (a provider's keys, see Alternatives): the gateway sends
	// one at a time and moves on to the next when the provider answers 401
	// or 429.
	Headers map[string]string
	// UpstreamModel, when set, replaces the model name in request bodies.
	UpstreamModel string
	// HealthURL, when set, answers 200 while the replica is healthy. The
	// gateway probes it itself when the plugin cannot answer Status.
	HealthURL string
	// Adapters are the spec's adapters the replica loaded, by name, each
	// with a JSON object of the request body members the gateway sets on
	// requests for it: {"model": "…"} for an engine that serves the
	// adapter under another name, llama-server's {"lora": […]}; "{}" for
	// none. The gateway sends a request for an adapter only to replicas
	// that list it.
	Adapters map[string]string
}

// Alternatives is a header value that offers each of values in turn
// (see Replica.Headers).
func Alternatives(values []string) string { return strings.Join(values, "\n") }

// SplitKeys splits an api_key option: several keys are separated by
// commas, for failover between them.
func SplitKeys(opt string) []string {
	var out []string
	for _, k := range strings.Split(opt, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// Adopter is implemented by engines whose replicas outlive the plugin
// process: engine servers are not killed when their plugin dies, so a
// plugin crash or hang cuts no request. When the gateway restarts the
// plugin it hands each replica the previous run started to Adopt, and the
// new run supervises (Status) and stops (Stop) it as its own. Adopt fails
// when the replica is gone; ErrAdoptUnsupported says the engine cannot.
type Adopter interface {
	Adopt(ctx context.Context, r Replica) error
}

// ErrAdoptUnsupported is returned by Adopt for an engine that does not
// implement Adopter (plugins written before it existed).
var ErrAdoptUnsupported = errors.New("engine cannot adopt replicas")

// Adopt hands r to eng if it can take it.
func Adopt(ctx context.Context, eng Engine, r Replica) error {
	a, ok := eng.(Adopter)
	if !ok {
		return ErrAdoptUnsupported
	}
	return a.Adopt(ctx, r)
}

// Status is the state of one replica.
type Status struct {
	State    string
	Message  string
	PID      int64
	Inflight int64
}
