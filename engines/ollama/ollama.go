// Package ollama is the Ollama engine: each replica is its own `ollama
// serve` (a private loopback port, models directory and HOME), into which
// the catalog's GGUF file is created as a model and loaded, then served
// through Ollama's OpenAI-compatible /v1 endpoints. llmgw decides when a
// replica stops, so Ollama keeps the model loaded (keep-alive -1).
package ollama

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/llmgw/llmgw/engines/internal/proc"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Version of the ollama engine.
const Version = "0.1.0"

// Engine implements engine.Engine for Ollama.
type Engine struct {
	// Servers holds the ollama command (the engine option bin, else
	// ollama on PATH) and the replicas; starting the server, creating and
	// loading the model may take 10 minutes.
	proc.Servers
	mu   sync.Mutex
	dirs map[string]string // replica → its private directory
}

// New returns the engine with its binary found.
func New(logger hclog.Logger) *Engine {
	e := &Engine{dirs: map[string]string{}}
	e.Init(logger, "ollama", "ollama", 10*time.Minute)
	return e
}

// Info describes the engine; it fails when ollama cannot be found.
func (e *Engine) Info(context.Context) (engine.Info, error) {
	return e.Describe(info)
}

// info is the engine's description. Ollama's listen address is its
// environment (OLLAMA_HOST), which llmgw sets and no option reaches; a
// model's args are not passed to ollama serve.
var info = engine.Info{Type: "ollama", Version: Version, Protocol: engine.ProtocolVersion,
	Capabilities: []string{engine.CapChat, engine.CapCompletions, engine.CapEmbeddings, engine.CapAdapters},
	Formats:      []string{"gguf"},
	Options: []engine.Option{
		{Name: "template", Description: "the Modelfile TEMPLATE (Go template syntax); default: one that supports tools"},
		{Name: "system", Description: "the Modelfile SYSTEM message"},
		{Name: "param_*", Description: "a Modelfile PARAMETER: param_temperature 0.2, param_stop …"},
		{Name: "flash_attention", Type: engine.TypeBool, Description: "run attention without materialising it (OLLAMA_FLASH_ATTENTION); with many slots of long prompts on CPUs, each slot's attention then costs its own tokens, not every used cell's"},
		{Name: "kv_cache_type", Description: "the K/V cache's type: f16 (Ollama's default), q8_0 or q4_0 (OLLAMA_KV_CACHE_TYPE; needs flash_attention)"},
	},
	Example: `name: qwen-small
engine: ollama
source: mirror://qwen2.5-0.5b/v1
options:
  param_temperature: 0.2
scaling:
  min: 0
  max: 1
`,
}

// DefaultTemplate is the chat template for GGUF files that carry none:
// each message on its own line after its role. It supports tools, so that
// Ollama accepts requests with tools: the tools are listed in the system
// line as JSON, an assistant's earlier tool calls are written back as
// {"name": …, "arguments": …} objects (the shape Ollama's parser then looks
// for in the answer, taken from the range over .ToolCalls), and tool
// results follow "tool:". System messages are in .System, so the range
// skips them.
const DefaultTemplate = `{{- if or .System .Tools }}system:{{ if .System }} {{ .System }}{{ end }}
{{- if .Tools }}
You can call these tools, given as JSON schemas:
{{- range .Tools }}
{{ . }}
{{- end }}
To call tools, answer with one JSON object per call: {"name": <the tool's name>, "arguments": <an object of its arguments>}.
{{- end }}
{{ end }}
{{- range .Messages }}
{{- if eq .Role "system" }}
{{- else if .ToolCalls }}assistant:{{ range .ToolCalls }} {"name": "{{ .Function.Name }}", "arguments": {{ .Function.Arguments }}}{{ end }}
{{ else }}{{ .Role }}: {{ .Content }}
{{ end }}
{{- end }}assistant:`

// Options a model may set for this engine: template, and parameters for
// the Modelfile as param_<name> (param_temperature 0.2, param_stop …).
// Values are written into the Modelfile, so a parameter's value is one
// line.
func checkOptions(opts map[string]string) error {
	if err := info.CheckOptions(opts); err != nil {
		return err
	}
	if t, set := opts["kv_cache_type"]; set {
		if !slices.Contains([]string{"f16", "q8_0", "q4_0"}, t) {
			return fmt.Errorf("ollama option kv_cache_type %q: use f16, q8_0 or q4_0", t)
		}
		if fa, _ := strconv.ParseBool(opts["flash_attention"]); !fa && t != "f16" {
			return fmt.Errorf("ollama option kv_cache_type %s needs flash_attention true: Ollama quantises the K/V cache only with flash attention", t)
		}
	}
	for k, v := range opts {
		if strings.HasPrefix(k, "param_") && strings.ContainsAny(k+v, "\r\n") {
			return fmt.Errorf("ollama option %s: a parameter's name and value must be on one line", k)
		}
	}
	return nil
}

// Modelfile returns the Modelfile that creates the replica's model.
func Modelfile(spec engine.ReplicaSpec) (string, error) {
	if err := checkOptions(spec.Options); err != nil {
		return "", err
	}
	if len(spec.Args) > 0 {
		return "", fmt.Errorf("model %q: the ollama engine passes no args to ollama serve; remove args and use options template, system and param_<name>", spec.Model)
	}
	src, err := filepath.Abs(spec.Source)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "FROM %s\n", src)
	tmpl := spec.Options["template"]
	if tmpl == "" {
		tmpl = DefaultTemplate
	}
	if strings.Contains(tmpl, `"""`) {
		return "", fmt.Errorf("ollama option template must not contain three quotes in a row")
	}
	fmt.Fprintf(&b, "TEMPLATE \"\"\"%s\"\"\"\n", tmpl)
	if s := spec.Options["system"]; s != "" {
		if strings.Contains(s, `"""`) {
			return "", fmt.Errorf("ollama option system must not contain three quotes in a row")
		}
		fmt.Fprintf(&b, "SYSTEM \"\"\"%s\"\"\"\n", s)
	}
	if spec.ContextLength > 0 {
		fmt.Fprintf(&b, "PARAMETER num_ctx %d\n", spec.ContextLength)
	}
	// Threads follow the cores the model says a replica needs, unless
	// set outright; without either, Ollama takes every core.
	if _, set := spec.Options["param_num_thread"]; !set && spec.Cores > 0 {
		fmt.Fprintf(&b, "PARAMETER num_thread %d\n", spec.Cores)
	}
	var params []string
	for k := range spec.Options {
		if strings.HasPrefix(k, "param_") {
			params = append(params, k)
		}
	}
	slices.Sort(params)
	for _, k := range params {
		for _, v := range strings.Split(spec.Options[k], "\x1f") { // repeated values (stop) joined by \x1f
			fmt.Fprintf(&b, "PARAMETER %s %s\n", strings.TrimPrefix(k, "param_"), v)
		}
	}
	return b.String(), nil
}

// Env returns the environment of a replica's ollama serve. Its prompt
// cache is the multi-user one: a request that shares only a prefix (a
// system prompt) with another conversation's slot gets a copy of that
// prefix in a free slot instead of taking the slot over, so that
// conversations sharing a system prompt keep their own cached turns.
func Env(spec engine.ReplicaSpec, port int, dir string) []string {
	env := []string{
		"OLLAMA_HOST=127.0.0.1:" + strconv.Itoa(port),
		"HOME=" + filepath.Join(dir, "home"),
		"OLLAMA_MODELS=" + filepath.Join(dir, "models"),
		"OLLAMA_NUM_PARALLEL=" + strconv.FormatInt(max(spec.Concurrency, 1), 10),
		"OLLAMA_KEEP_ALIVE=-1",
		// The model, and each adapter's model (see AdapterModelfile).
		"OLLAMA_MAX_LOADED_MODELS=" + strconv.Itoa(1+len(spec.Adapters)),
		"OLLAMA_NOPRUNE=1",
		"OLLAMA_MULTIUSER_CACHE=1",
	}
	if fa, _ := strconv.ParseBool(spec.Options["flash_attention"]); fa {
		env = append(env, "OLLAMA_FLASH_ATTENTION=1")
	}
	if t := spec.Options["kv_cache_type"]; t != "" {
		env = append(env, "OLLAMA_KV_CACHE_TYPE="+t)
	}
	return env
}

// AdapterModelfile returns the Modelfile of an adapter's own Ollama
// model: Ollama loads one adapter per model, so each adapter becomes a
// model created from the replica's model (whose template and parameters
// it keeps) plus the adapter.
func AdapterModelfile(spec engine.ReplicaSpec, a engine.Adapter) (string, error) {
	if a.ScaleOr1() != 1 {
		return "", fmt.Errorf("model %q: adapter %q: ollama applies adapters at scale 1; remove scale", spec.Model, a.Name)
	}
	if strings.ContainsAny(a.Path, "\r\n") {
		return "", fmt.Errorf("model %q: adapter %q: its path must be one line", spec.Model, a.Name)
	}
	path, err := filepath.Abs(a.Path)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("FROM %s\nADAPTER %s\n", ModelName(spec.Model), path), nil
}

// ModelName is the name the replica's model gets inside its Ollama: the
// catalog's name where Ollama accepts it, so answers name it as the client
// did.
func ModelName(model string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(model) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Start runs ollama serve for one replica, creates the model from the
// catalog's GGUF file, loads it, and returns once it answers.
func (e *Engine) Start(ctx context.Context, spec engine.ReplicaSpec) (engine.Replica, error) {
	if e.BinErr != nil {
		return engine.Replica{}, e.BinErr
	}
	if err := proc.CheckGGUF(spec.Source, "ollama"); err != nil {
		return engine.Replica{}, fmt.Errorf("model %q: %w", spec.Model, err)
	}
	modelfile, err := Modelfile(spec)
	if err != nil {
		return engine.Replica{}, err
	}
	port, err := proc.FreePort()
	if err != nil {
		return engine.Replica{}, err
	}
	dir, err := os.MkdirTemp("", dirPrefix(spec.ReplicaID))
	if err != nil {
		return engine.Replica{}, err
	}
	for _, d := range []string{"home", "models"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return engine.Replica{}, err
		}
	}
	env := append(os.Environ(), Env(spec, port, dir)...)
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(e.Bin, "serve")
	cmd.Env = env
	p := &proc.Process{ID: spec.ReplicaID, Cmd: cmd, BaseURL: base + "/v1", HealthURL: base + "/", CPUs: spec.CPUs, GPUs: spec.GPUDevices}
	fail := func(err error) (engine.Replica, error) {
		_ = e.Table.Stop(spec.ReplicaID, 0)
		_ = os.RemoveAll(dir)
		return engine.Replica{}, fmt.Errorf("starting ollama for %q: %w", spec.Model, err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.StartTimeout)
	defer cancel()
	if err := e.Table.Start(ctx, p, false, "", e.StartTimeout); err != nil {
		_ = os.RemoveAll(dir)
		return engine.Replica{}, fmt.Errorf("starting ollama for %q: %w", spec.Model, err)
	}
	name := ModelName(spec.Model)
	mf := filepath.Join(dir, "Modelfile")
	if err := os.WriteFile(mf, []byte(modelfile), 0o600); err != nil {
		return fail(err)
	}
	create := exec.CommandContext(ctx, e.Bin, "create", name, "-f", mf)
	create.Env = env
	if out, err := create.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("ollama create: %v: %s", err, lastLine(out)))
	}
	// Load it now, and keep it loaded: llmgw decides when the replica goes.
	if err := post(ctx, base+"/api/generate", map[string]any{"model": name, "keep_alive": -1}); err != nil {
		return fail(fmt.Errorf("loading the model: %w", err))
	}
	adapters, err := e.createAdapters(ctx, spec, env, dir, base)
	if err != nil {
		return fail(err)
	}
	e.mu.Lock()
	e.dirs[spec.ReplicaID] = dir
	e.mu.Unlock()
	rep := engine.Replica{ID: p.ID, BaseURL: p.BaseURL, PID: p.Status().PID, Adapters: adapters}
	if name != spec.Model {
		rep.UpstreamModel = name
	}
	return rep, nil
}

// createAdapters creates and loads each adapter's Ollama model, and
// returns the request member that selects it: its model name.
func (e *Engine) createAdapters(ctx context.Context, spec engine.ReplicaSpec, env []string, dir, base string) (map[string]string, error) {
	if len(spec.Adapters) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(spec.Adapters))
	for i, a := range spec.Adapters {
		mf, err := AdapterModelfile(spec, a)
		if err != nil {
			return nil, err
		}
		path := filepath.Join(dir, fmt.Sprintf("Modelfile.adapter%d", i))
		if err := os.WriteFile(path, []byte(mf), 0o600); err != nil {
			return nil, err
		}
		name := ModelName(a.Name)
		create := exec.CommandContext(ctx, e.Bin, "create", name, "-f", path)
		create.Env = env
		if out, err := create.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ollama create for adapter %q: %v: %s", a.Name, err, lastLine(out))
		}
		if err := post(ctx, base+"/api/generate", map[string]any{"model": name, "keep_alive": -1}); err != nil {
			return nil, fmt.Errorf("loading adapter %q: %w", a.Name, err)
		}
		b, _ := json.Marshal(map[string]string{"model": name})
		out[a.Name] = string(b)
	}
	return out, nil
}

func post(ctx context.Context, url string, body any) error {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(msg))
	}
	return nil
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// dirPrefix names a replica's private directory, so that a later run of the
// plugin that adopts the replica finds it again.
func dirPrefix(id string) string {
	return "llmgw-ollama-" + strings.ReplaceAll(id, "/", "_") + "-"
}

// Adopt supervises a replica an earlier run of the plugin started, and
// takes back its private directory, which Stop removes.
func (e *Engine) Adopt(ctx context.Context, r engine.Replica) error {
	if err := e.Servers.Adopt(ctx, r); err != nil {
		return err
	}
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix(r.ID)+"*")); len(m) == 1 {
		e.mu.Lock()
		e.dirs[r.ID] = m[0]
		e.mu.Unlock()
	}
	return nil
}

// Stop stops a replica and removes its private directory.
func (e *Engine) Stop(_ context.Context, id string, grace time.Duration) error {
	err := e.Table.Stop(id, grace)
	e.mu.Lock()
	dir := e.dirs[id]
	delete(e.dirs, id)
	e.mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	return err
}

// Shutdown stops every replica.
func (e *Engine) Shutdown() {
	e.Servers.Shutdown()
	e.mu.Lock()
	defer e.mu.Unlock()
	for id, dir := range e.dirs {
		_ = os.RemoveAll(dir)
		delete(e.dirs, id)
	}
}
