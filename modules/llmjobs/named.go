package llmjobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// namedWorkflow turns a job's workflow into a graph when it names one of
// the model's workflows (a JSON string) filled with params; a graph is
// kept as it is. msg says what is wrong, for a 400.
func namedWorkflow(m *catalog.Model, raw json.RawMessage, params map[string]any) (json.RawMessage, string) {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		if len(params) > 0 {
			return nil, "parameters go with a workflow's name (one of the model's workflows); a whole workflow carries its own values"
		}
		return raw, ""
	}
	w := m.WorkflowNamed(name)
	if w == nil {
		var names []string
		for _, o := range m.Workflows {
			names = append(names, o.Name)
		}
		if len(names) == 0 {
			return nil, fmt.Sprintf("model %s has no workflows of its own: send a whole workflow in ComfyUI's API format (Export (API)), or use a model added from a preset", m.Name)
		}
		return nil, fmt.Sprintf("model %s has no workflow %s; its workflows are %s", m.Name, catalog.Bounded(name), strings.Join(names, ", "))
	}
	g, err := w.Fill(params, newSeed)
	if err != nil {
		return nil, err.Error()
	}
	return g, ""
}

// imageWorkflow is the workflow of an image request: the model's own
// txt2img workflow when it has one (given the request's values for the
// parameters it takes), else ComfyUI's default text to image workflow.
func imageWorkflow(m *catalog.Model, prompt string, width, height, n int) (json.RawMessage, error) {
	w := m.WorkflowNamed("txt2img")
	if w == nil {
		return txt2img(checkpointOf(m), prompt, width, height, n), nil
	}
	params := map[string]any{}
	takes := w.ParamNames()
	for k, v := range map[string]any{"prompt": prompt, "width": width, "height": height, "batch_size": n} {
		if slices.Contains(takes, k) {
			params[k] = v
		}
	}
	return w.Fill(params, newSeed)
}

// fillNamed replaces a job's workflow given by name with the model's
// workflow of that name filled with the job's parameters, or answers why
// it cannot (the model's 404 first, when the model is unknown).
func (h *Jobs) fillNamed(w http.ResponseWriter, r *http.Request, req *createRequest) bool {
	if !bytes.HasPrefix(bytes.TrimSpace(req.Workflow), []byte(`"`)) && len(req.Parameters) == 0 {
		return true // a whole workflow
	}
	m, err := h.svc.app.Load().Lookup(req.Model)
	if err != nil {
		return h.checkModel(w, r, req.Model)
	}
	wf, msg := namedWorkflow(m, req.Workflow, req.Parameters)
	if msg != "" {
		apiErr(w, r, http.StatusBadRequest, "invalid_workflow", "workflow", "%s", msg)
		return false
	}
	req.Workflow = wf
	return true
}
