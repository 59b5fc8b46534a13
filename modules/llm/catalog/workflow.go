package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
)

// Workflow is a ComfyUI workflow that uses a model, kept with the model
// (a preset brings its own): a job or an image request names it and
// gives its parameters instead of sending the whole graph.
type Workflow struct {
	// Name of the workflow, such as txt2img; unique in its model.
	Name string `json:"name"`
	// Description says what it makes.
	Description string `json:"description,omitempty"`
	// Graph is the workflow in ComfyUI's API format (Export (API)). A
	// string input that is exactly "{{name}}" is a parameter: the job's
	// value for name replaces it, keeping its JSON type (a number stays
	// a number).
	Graph json.RawMessage `json:"graph"`
	// Parameters are the defaults of the parameters; a parameter with
	// no default must be given. "seed" with no value is random.
	Parameters map[string]any `json:"parameters,omitempty"`
}

// paramRef matches a parameter in a graph: "{{name}}".
var paramRef = regexp.MustCompile(`^\{\{([a-z][a-z0-9_]{0,63})\}\}$`)

// maxGraph bounds a workflow's graph.
const maxGraph = 1 << 20

// check checks the workflow's name and graph.
func (w *Workflow) check(model string) error {
	if err := CheckName(fmt.Sprintf("model %q: workflow name", model), w.Name); err != nil {
		return err
	}
	if len(w.Graph) > maxGraph {
		return fmt.Errorf("model %q: workflow %s: its graph is %d bytes; at most 1 MiB", model, w.Name, len(w.Graph))
	}
	var nodes map[string]struct {
		ClassType string `json:"class_type"`
	}
	if err := json.Unmarshal(w.Graph, &nodes); err != nil || len(nodes) == 0 {
		return fmt.Errorf("model %q: workflow %s: the graph must be a workflow in ComfyUI's API format (Export (API)): an object of node id → {class_type, inputs}", model, w.Name)
	}
	for id, n := range nodes {
		if n.ClassType == "" {
			return fmt.Errorf("model %q: workflow %s: node %s has no class_type; export the workflow with Export (API)", model, w.Name, Bounded(id))
		}
	}
	return nil
}

// ParamNames are the parameters the workflow's graph takes, sorted.
func (w *Workflow) ParamNames() []string {
	g, err := w.decode()
	if err != nil {
		return nil
	}
	return paramNames(g)
}

// Uses reports whether an input of the graph is exactly value (a
// checkpoint's file name, say).
func (w *Workflow) Uses(value string) bool {
	g, err := w.decode()
	found := false
	if err == nil {
		walkStrings(g, func(s string) { found = found || s == value })
	}
	return found
}

// decode is the graph as JSON values, numbers kept as written.
func (w *Workflow) decode() (any, error) {
	var g any
	dec := json.NewDecoder(bytes.NewReader(w.Graph))
	dec.UseNumber()
	return g, dec.Decode(&g)
}

// paramNames are the parameters in a decoded graph, sorted.
func paramNames(g any) []string {
	var names []string
	walkStrings(g, func(s string) {
		if m := paramRef.FindStringSubmatch(s); m != nil && !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	})
	slices.Sort(names)
	return names
}

// Fill is the workflow's graph with its parameters replaced: params,
// then the defaults; seed, when neither gives it, is newSeed(). An
// unknown parameter, or one with no value, is an error naming it.
func (w *Workflow) Fill(params map[string]any, newSeed func() uint64) (json.RawMessage, error) {
	graph, err := w.decode()
	if err != nil {
		return nil, err
	}
	names := paramNames(graph)
	for k := range params {
		if !slices.Contains(names, k) {
			return nil, fmt.Errorf("workflow %s has no parameter %s; its parameters are %s", w.Name, Bounded(k), strings.Join(names, ", "))
		}
	}
	vals := map[string]any{}
	for _, n := range names {
		v, ok := params[n]
		if !ok {
			v, ok = w.Parameters[n]
		}
		if !ok && n == "seed" {
			v, ok = newSeed(), true
		}
		if !ok {
			return nil, fmt.Errorf("workflow %s needs the parameter %s", w.Name, n)
		}
		vals[n] = v
	}
	graph = replaceParams(graph, vals)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(graph); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(buf.Bytes()), nil
}

// replaceParams replaces each "{{name}}" string in v by vals[name].
func replaceParams(v any, vals map[string]any) any {
	switch x := v.(type) {
	case string:
		if m := paramRef.FindStringSubmatch(x); m != nil {
			return vals[m[1]]
		}
	case map[string]any:
		for k, e := range x {
			x[k] = replaceParams(e, vals)
		}
	case []any:
		for i, e := range x {
			x[i] = replaceParams(e, vals)
		}
	}
	return v
}

// walkStrings calls f with every string in a decoded JSON value.
func walkStrings(v any, f func(string)) {
	switch x := v.(type) {
	case string:
		f(x)
	case map[string]any:
		for _, e := range x {
			walkStrings(e, f)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, f)
		}
	}
}

// WorkflowNamed is the model's workflow called name, or nil.
func (m *Model) WorkflowNamed(name string) *Workflow {
	for _, w := range m.Workflows {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// checkWorkflows checks the model's workflows: each valid, names unique.
func (m *Model) checkWorkflows() error {
	seen := map[string]bool{}
	for _, w := range m.Workflows {
		if err := w.check(m.Name); err != nil {
			return err
		}
		if seen[w.Name] {
			return fmt.Errorf("model %q: workflow %s is declared twice", m.Name, w.Name)
		}
		seen[w.Name] = true
	}
	return nil
}

// parseWorkflow reads one workflow of a model, its graph from a file
// (ComfyUI's Export (API)):
//
//	workflow <name> <file.json> {
//		description <text>
//		param       <name> <default>   # a number stays a number
//	}
func parseWorkflow(d *caddyfile.Dispenser, m *Model) error {
	w := &Workflow{}
	var file string
	if !d.Args(&w.Name, &file) || d.NextArg() {
		return d.ArgErr()
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return d.Errf("model %q: workflow %s: %v", m.Name, w.Name, err)
	}
	w.Graph = json.RawMessage(bytes.TrimSpace(b))
	err = caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "description":
			return caddyfileutil.OneArg(d, &w.Description)
		case "param":
			var name, val string
			if !d.Args(&name, &val) || d.NextArg() {
				return d.ArgErr()
			}
			if w.Parameters == nil {
				w.Parameters = map[string]any{}
			}
			var n json.Number
			if json.Unmarshal([]byte(val), &n) == nil {
				w.Parameters[name] = n
			} else {
				w.Parameters[name] = val
			}
			return nil
		}
		return d.Errf("unrecognized workflow subdirective %q; use description or param", dir)
	}, "param")
	if err != nil {
		return err
	}
	if err := w.check(m.Name); err != nil {
		return d.Err(err.Error())
	}
	m.Workflows = append(m.Workflows, w)
	return nil
}
