package apidoc

import (
	"time"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// Bodies are an operation's request and response bodies, as Op has them.
type Bodies struct {
	Request, Response any
	Code              int
}

// AppBodies returns the bodies of the llm app's operation "METHOD path":
// the schema written by hand in llmapi where there is one, else the Go
// type the handler reads or writes.
func AppBodies(method, path string) Bodies {
	key := method + " " + path
	b := appTypes()[key]
	for _, m := range []map[string]llmapi.OpSchemas{llmapi.Schemas, llmapi.OverviewSchemas, llmapi.GuardHistorySchemas, llmapi.TrafficSchemas, llmapi.RequestSchemas, llmapi.KBSchemas} {
		if s, ok := m[key]; ok {
			if s.Request != nil {
				b.Request = s.Request
			}
			if s.Response != nil {
				b.Response = s.Response
			}
		}
	}
	return b
}

// keyRequest is the body of POST /llm/keys.
type keyRequest struct {
	ID      string          `json:"id,omitempty"`
	Project string          `json:"project"`
	Limits  *tenancy.Limits `json:"limits,omitempty"`
}

// mirrorAdd is the body of POST /llm/mirror/versions.
type mirrorAdd struct {
	Model       string `json:"model"`
	Version     string `json:"version,omitempty"`
	Source      string `json:"source"`
	AllowPickle bool   `json:"allow_pickle,omitempty"`
	Track       bool   `json:"track,omitempty"`
}

// usageAnswer is the body of GET /llm/usage.
type usageAnswer struct {
	Node   string                   `json:"node"`
	From   time.Time                `json:"from"`
	To     time.Time                `json:"to"`
	Models map[string]*llmapi.Usage `json:"models"`
	Total  llmapi.Usage             `json:"total"`
}

// syncAnswer is the body of POST /llm/mirror/sync.
type syncAnswer struct {
	Report *mirror.SyncReport `json:"report"`
	Status mirror.SyncStatus  `json:"status"`
	Error  string             `json:"error,omitempty"`
}

// appTypes are the Go types of the app's bodies, keyed "METHOD path".
func appTypes() map[string]Bodies {
	level, levels := llmapi.TenantLevel{}, []llmapi.TenantLevel{}
	body := tenancy.Body{}
	return map[string]Bodies{
		"POST /llm/models":                                               {Response: llmapi.AddedModel{}, Code: 201},
		"DELETE /llm/models/{name}":                                      {Response: obj(map[string]any{"removed": typ("string"), "purged": arr(typ("string"))}, "removed")},
		"POST /llm/models/{name}/scale":                                  {Request: catalog.Scaling{}, Response: llmapi.Scaled{}},
		"POST /llm/models/{name}/stop":                                   {Response: llmapi.ModelStatus{}},
		"POST /llm/models/{name}/start":                                  {Response: llmapi.ModelStatus{}},
		"POST /llm/models/{name}/retry":                                  {Response: llmapi.Retried{}},
		"POST /llm/models/{name}/licence/accept":                         {Request: obj(map[string]any{"tenant": typ("string")}), Response: llmapi.LicenceStatus{}},
		"GET /llm/licences":                                              {Response: []llmapi.LicenceStatus{}},
		"GET /llm/presets":                                               {Response: []llmapi.PresetStatus{}},
		"GET /llm/presets/{name}":                                        {Response: llmapi.PresetStatus{}},
		"POST /llm/presets/{name}/add":                                   {Request: obj(map[string]any{"name": typ("string")}), Response: llmapi.AddedModel{}, Code: 201},
		"POST /llm/models/{name}/test":                                   {Response: llmapi.ModelTest{}},
		"POST /llm/replicas/{id}/restart":                                {Response: obj(map[string]any{"restarted": typ("string")}, "restarted")},
		"GET /llm/engines":                                               {Response: []llmapi.EngineStatus{}},
		"GET /llm/version":                                               {Response: llmapi.BuildInfo{}},
		"POST /llm/restart":                                              {Response: llmapi.Restarting{}, Code: 202},
		"POST /llm/nodes/{name}/upgrade":                                 {Response: llmapi.NodeUpgrade{}},
		"GET /llm/nodes":                                                 {Response: llmapi.NodesStatus{}},
		"POST /llm/nodes/{name}/drain":                                   {Response: obj(map[string]any{"node": typ("string"), "drained": typ("boolean")}, "node", "drained")},
		"POST /llm/nodes/{name}/undrain":                                 {Response: obj(map[string]any{"node": typ("string"), "drained": typ("boolean")}, "node", "drained")},
		"GET /llm/node":                                                  {Response: llmapi.NodeStatus{}},
		"GET /llm/peers":                                                 {Response: arr(ref(llmapi.PeerStatus{}))},
		"GET /llm/keys":                                                  {Response: map[string]any{"oneOf": []any{arr(ref(llmapi.KeyInfo{})), ref(llmapi.KeyPage{})}}},
		"POST /llm/keys":                                                 {Request: keyRequest{}, Response: llmapi.KeyInfo{}, Code: 201},
		"GET /llm/keys/{id}":                                             {Response: llmapi.KeyInfo{}},
		"DELETE /llm/keys/{id}":                                          {Response: NoContent},
		"POST /llm/keys/{id}/rotate":                                     {Response: llmapi.KeyInfo{}},
		"PUT /llm/keys/{id}/limits":                                      {Request: tenancy.Limits{}, Response: llmapi.KeyInfo{}},
		"GET /llm/usage":                                                 {Response: usageAnswer{}},
		"GET /llm/cache":                                                 {Response: arr(obj(map[string]any{}))},
		"POST /llm/cache/purge":                                          {Request: obj(map[string]any{"model": typ("string"), "scope": typ("string")}), Response: obj(map[string]any{"purged": typ("integer")}, "purged")},
		"GET /llm/mirror":                                                {Response: llmapi.MirrorView{}},
		"GET /llm/mirror/versions":                                       {Response: []mirror.VersionInfo{}},
		"POST /llm/mirror/versions":                                      {Request: mirrorAdd{}, Response: mirror.AddResult{}},
		"GET /llm/mirror/versions/{model}/{version}":                     {Response: mirror.Manifest{}},
		"DELETE /llm/mirror/versions/{model}/{version}":                  {Response: mirror.RemoveResult{}},
		"POST /llm/mirror/versions/{model}/{version}/verify":             {Response: []mirror.FileCheck{}},
		"POST /llm/mirror/sync":                                          {Response: syncAnswer{}},
		"POST /llm/models/{name}/restart":                                {Response: llmapi.Rollout{}},
		"POST /llm/models/{name}/settings":                               {Response: llmapi.Rollout{}},
		"GET /llm/openapi.json":                                          {Response: obj(map[string]any{"openapi": typ("string"), "info": obj(map[string]any{}), "paths": obj(map[string]any{}), "components": obj(map[string]any{})}, "openapi", "paths")},
		"GET /llm/kb/stores":                                             {Response: []llmapi.KBStore{}},
		"POST /llm/kb/stores":                                            {Request: llmapi.KBCreateStore{}, Response: llmapi.KBStore{}, Code: 201},
		"GET /llm/kb/stores/{id}":                                        {Response: llmapi.KBStoreDetail{}},
		"DELETE /llm/kb/stores/{id}":                                     {Response: llmapi.KBDeleted{}},
		"POST /llm/kb/stores/{id}/files":                                 {Response: llmapi.KBFile{}, Code: 201},
		"POST /llm/kb/stores/{id}/reindex":                               {Response: llmapi.KBReindexed{}},
		"POST /llm/kb/stores/{id}/search":                                {Request: llmapi.KBSearch{}, Response: llmapi.KBSearchResults{}},
		"GET /llm/providers/models":                                      {Response: []llmapi.ProvidersModel{}},
		"GET /llm/providers/models/{name}":                               {Response: llmapi.ProvidersModel{}},
		"GET /llm/tenants":                                               {Response: levels},
		"GET /llm/tenants/orgs":                                          {Response: levels},
		"POST /llm/tenants/orgs":                                         {Request: body, Response: level, Code: 201},
		"GET /llm/tenants/orgs/{org}":                                    {Response: level},
		"PUT /llm/tenants/orgs/{org}":                                    {Request: body, Response: level},
		"PATCH /llm/tenants/orgs/{org}":                                  {Request: body, Response: level},
		"DELETE /llm/tenants/orgs/{org}":                                 {Response: NoContent},
		"GET /llm/tenants/orgs/{org}/teams":                              {Response: levels},
		"POST /llm/tenants/orgs/{org}/teams":                             {Request: body, Response: level, Code: 201},
		"GET /llm/tenants/orgs/{org}/teams/{team}":                       {Response: level},
		"PUT /llm/tenants/orgs/{org}/teams/{team}":                       {Request: body, Response: level},
		"PATCH /llm/tenants/orgs/{org}/teams/{team}":                     {Request: body, Response: level},
		"DELETE /llm/tenants/orgs/{org}/teams/{team}":                    {Response: NoContent},
		"GET /llm/tenants/orgs/{org}/teams/{team}/projects":              {Response: levels},
		"POST /llm/tenants/orgs/{org}/teams/{team}/projects":             {Request: body, Response: level, Code: 201},
		"GET /llm/tenants/orgs/{org}/teams/{team}/projects/{project}":    {Response: level},
		"PUT /llm/tenants/orgs/{org}/teams/{team}/projects/{project}":    {Request: body, Response: level},
		"PATCH /llm/tenants/orgs/{org}/teams/{team}/projects/{project}":  {Request: body, Response: level},
		"DELETE /llm/tenants/orgs/{org}/teams/{team}/projects/{project}": {Response: NoContent},
	}
}

func typ(t string) map[string]any { return map[string]any{"type": t} }

// ref marks a Go value inside a schema written by hand: Document
// replaces it with the value's schema.
func ref(v any) map[string]any { return map[string]any{goType: v} }

const goType = "x-go-type"

func obj(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func arr(items map[string]any) map[string]any { return map[string]any{"type": "array", "items": items} }
