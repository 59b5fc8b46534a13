package llmrouter

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// modelObject is one entry of GET /v1/models. The llmgw field is an
// extension: the catalog name behind an alias, the model's state and, when
// it is not running, why.
type modelObject struct {
	ID      string    `json:"id"`
	Object  string    `json:"object"`
	Created int64     `json:"created"`
	OwnedBy string    `json:"owned_by"`
	LLMGW   modelInfo `json:"llmgw"`

	allow []string // the names a key's models must match to see it
}

type modelInfo struct {
	Model    string `json:"model"`
	Engine   string `json:"engine"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	Replicas int    `json:"ready_replicas"`
	// Base is, for a LoRA adapter, the model it applies to.
	Base string `json:"base,omitempty"`
	// ContextLength is the model's context window in tokens, when it
	// declares one; MaxOutput the most tokens one answer may have for the
	// caller: the model's max_output, or its key's when lower.
	ContextLength int64 `json:"context_length,omitempty"`
	MaxOutput     int64 `json:"max_output,omitempty"`
}

var created = time.Now().Unix()

func objectsFor(s llmapi.ModelStatus, t *tenancy.Tenant) []modelObject {
	info := modelInfo{Model: s.Name, Engine: s.Engine, State: s.State, Reason: s.Reason, Replicas: len(s.Replicas),
		ContextLength: s.ContextLength, MaxOutput: tenancy.CapOf(&catalog.Model{MaxOutput: s.MaxOutput}, t).Tokens}
	out := []modelObject{{ID: s.Name, Object: "model", Created: created, OwnedBy: "llmgw", LLMGW: info, allow: []string{s.Name}}}
	for _, a := range s.Aliases {
		out = append(out, modelObject{ID: a, Object: "model", Created: created, OwnedBy: "llmgw", LLMGW: info, allow: []string{a, s.Name}})
	}
	// An adapter is a model of its own: a key sees it when its models
	// match the adapter's name.
	for _, a := range s.Adapters {
		ai := info
		ai.Model, ai.Base = a.Name, s.Name
		out = append(out, modelObject{ID: a.Name, Object: "model", Created: created, OwnedBy: "llmgw", LLMGW: ai, allow: []string{a.Name}})
	}
	return out
}

// serveModels lists the models the caller may use: all of them, or those
// its key allows when llm_quota ran first.
func (rt *Router) serveModels(w http.ResponseWriter, r *http.Request) {
	tenant, _ := tenancy.TenantOf(r)
	data := []modelObject{}
	for _, s := range rt.app.Status() {
		for _, o := range objectsFor(s, tenant) {
			if tenant == nil || tenant.Allowed(o.allow...) {
				data = append(data, o)
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Object string        `json:"object"`
		Data   []modelObject `json:"data"`
	}{"list", data})
}

func (rt *Router) serveModel(w http.ResponseWriter, r *http.Request, id string) {
	m, err := rt.app.LookupLatest(id)
	if err != nil {
		toAPIError(err).Write(w)
		return
	}
	base := m.Name
	if b := m.AdapterOf(); b != "" {
		base = b
	}
	for _, s := range rt.app.Status() {
		if s.Name != base {
			continue
		}
		tenant, _ := tenancy.TenantOf(r)
		for _, o := range objectsFor(s, tenant) {
			if o.ID == id {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(o)
				return
			}
		}
	}
}
