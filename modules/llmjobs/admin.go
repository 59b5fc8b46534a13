package llmjobs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llmjobs/comfy"
	"github.com/llmgw/llmgw/plugins/engine"
)

func init() {
	caddy.RegisterModule(Admin{})
	llm.DescribeAdminOperations(llm.AdminOperation{Method: "GET", Path: "/llm/jobs/models", Response: []ModelFiles{},
		Summary: "For each model whose engine runs workflows (ComfyUI, the image simulator), the model files each of its replicas on this node found in its model folders (checkpoints, loras, vae, …), each with the model's workflows that use it; a replica that does not answer says why"})
}

// Admin is admin.api.llm_jobs: GET /llm/jobs/models.
type Admin struct{}

// CaddyModule returns the Caddy module information.
func (Admin) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "admin.api.llm_jobs", New: func() caddy.Module { return new(Admin) }}
}

// Routes returns the admin routes.
func (Admin) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/llm/jobs/models", Handler: caddy.AdminHandlerFunc(modelFiles)}}
}

// ModelFiles is what the replicas of one model found.
type ModelFiles struct {
	Model    string         `json:"model"`
	Engine   string         `json:"engine"`
	Replicas []ReplicaFiles `json:"replicas"`
	// Note says why no replica is listed.
	Note string `json:"note,omitempty"`
}

// ReplicaFiles is what one replica found in its model folders.
type ReplicaFiles struct {
	ID      string                 `json:"id"`
	Folders map[string][]ModelFile `json:"folders,omitempty"`
	Error   string                 `json:"error,omitempty"`
}

// ModelFile is a file of a model folder and the workflows that use it.
type ModelFile struct {
	File      string   `json:"file"`
	Workflows []string `json:"workflows"`
}

// modelFiles answers GET /llm/jobs/models.
func modelFiles(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("use GET")}
	}
	var app *llm.App
	pool.Range(func(_, v any) bool {
		app = v.(*service).app.Load()
		return app == nil
	})
	if app == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no llm_jobs handler is running: add llm_jobs to a site's route")}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	out := []ModelFiles{}
	for _, st := range app.Status() {
		m, err := app.Lookup(st.Name)
		if err != nil || !app.Speaks(m, engine.CapComfyUI) {
			continue
		}
		mf := ModelFiles{Model: m.Name, Engine: m.Engine, Replicas: []ReplicaFiles{}}
		for _, rs := range st.Replicas {
			u, err := url.Parse(rs.URL)
			if rs.State != "ready" || err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1") {
				continue // starting, draining, or on another node
			}
			mf.Replicas = append(mf.Replicas, replicaFiles(ctx, rs.ID, rs.URL, m))
		}
		if len(mf.Replicas) == 0 {
			mf.Note = "no replica of it is ready on this node (it may start on demand, with its first job)"
		}
		out = append(out, mf)
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(out)
}

// replicaFiles asks one replica what it found.
func replicaFiles(ctx context.Context, id, base string, m *catalog.Model) ReplicaFiles {
	folders, err := (&comfy.Client{Base: base}).ModelFiles(ctx)
	if err != nil {
		return ReplicaFiles{ID: id, Error: err.Error()}
	}
	rf := ReplicaFiles{ID: id, Folders: map[string][]ModelFile{}}
	for folder, files := range folders {
		list := make([]ModelFile, 0, len(files))
		for _, f := range files {
			list = append(list, ModelFile{File: f, Workflows: workflowsUsing(m, f)})
		}
		rf.Folders[folder] = list
	}
	return rf
}

// workflowsUsing names the model's workflows with an input equal to file.
func workflowsUsing(m *catalog.Model, file string) []string {
	names := []string{}
	for _, wf := range m.Workflows {
		if wf.Uses(file) {
			names = append(names, wf.Name)
		}
	}
	return names
}

// Interface guards
var _ caddy.AdminRouter = (*Admin)(nil)
