package llm

import (
	"net/http"
	"slices"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/internal/adminroute"
	"github.com/llmgw/llmgw/modules/llm/apidoc"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// operation is one admin API operation. The admin routes and the OpenAPI
// document are both made from one table (adminOperations), so they cannot
// drift apart.
type operation struct {
	method, path, summary string
	pattern               string // the admin mux pattern that serves it
	handler               caddy.AdminHandlerFunc
	body                  string // the request body, for the document
}

// appOperations are the app's operations of the models, keys, nodes, mirror,
// plan, audit, weights, updates and tenants routes.
var appOperations = []operation{
	{"GET", "/llm/models", "List models with their state, scaling and replicas", "/llm/models", getModels, ""},
	{"POST", "/llm/models", "Add a model (validated against the whole catalog; its source checked first without a download, 422 with the reason when it fails, \"check_source\": false to skip); kept in Caddy storage, no reload needed; 201 with its status and source_check", "/llm/models", getModels, `{"name":"m","engine":"sim","scaling":{"min":1}}`},
	{"GET", "/llm/models/{name}", "Get one model (by name or alias)", "/llm/models/", getModel, ""},
	{"DELETE", "/llm/models/{name}", "Remove a model added through the API (config models are changed in the file); ?purge=true also removes its weights from the mirror and the node cache, keeping what another model uses", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/scale", "Rescale a model added through the API; max 0 keeps it in the catalog without running it (listed as stopped, requests get 503), a max above 0 starts it again, and so does a scale of a model an administrator stopped (note says so)", "/llm/models/", getModel, `{"min":1,"max":4,"idle_timeout":"10m","target_concurrency":16}`},
	{"POST", "/llm/models/{name}/settings", "Change a model's class, owner, fallbacks or canary (replicas keep running; the answer is the model's status), or its context length, resources (memory, cores, GPUs), engine options or args without downtime: checked first as an add is (the catalog, the engine, the placement: 409 with the reason when the new shape does not fit, nothing changed), then each replica is replaced by one with the change, started beside it when the node has room, the old one draining once the new one is ready; the answer (a rollout) comes when the new replicas are ready. Works on runtime and config models; a config model's change is kept in Caddy storage and laid over the file at every start and reload. In a cluster the change is shared and every live node in turn replaces its replicas in place (each old one drains before its replacement starts) while the others serve", "/llm/models/", getModel, `{"context_length":8192,"options":{"ttft":"50ms"},"args":["--flash-attn"],"resources":{"memory":8589934592,"cores":4,"gpus":1}}`},
	{"POST", "/llm/models/{name}/restart", "Replace every replica of a model with a new one, as a live change does with no change: new ones start beside the old when the node has room, the old drain once the new are ready; the answer (a rollout) comes when they are. In a cluster every live node replaces its replicas in turn (each old one drains before its replacement starts, keeping the node's share of the plan) while the other nodes' serve", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/stop", "Stop a model: its replicas drain, requests get 503 saying so; kept across restarts", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/start", "Start a stopped model again", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/retry", "Start a model whose last start failed now, instead of at the end of its backoff (which doubles after each failed start, up to 30s); the answer is its status, starting. A retry that fails again backs off as before. 409 when the model is not failing to start (it runs, starts, was stopped, or its start did not fail), with its state; 404 an unknown model. In a cluster every live node where the start failed retries it, and nodes names them", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/test", "Test a model's connection now: each of its replicas on this node is probed as its health check does (an outside provider: GET <base_url>/models with its key); the answer says, per replica, the URL tried (never the key), the status, the latency and the reason it fails", "/llm/models/", getModel, ""},
	{"POST", "/llm/replicas/{id}/restart", "Replace one replica with a new one", "/llm/replicas/", restartReplica, ""},
	{"GET", "/llm/engines", "List every engine a model can use (built in, configured, and plugin files in plugin_dir), running or not: version, capabilities, formats, the options a model may set (required, secret, an example value, what each does) and an example model; running is true when a model runs it now", "/llm/engines", getEngines, ""},
	{"GET", "/llm/nodes", "The cluster's nodes: address, heartbeat, capacity, use, replicas, drained or not, the leader", "/llm/nodes", getNodes, ""},
	{"POST", "/llm/nodes/{name}/drain", "Drain a node for maintenance: its replicas start elsewhere first, then stop there; it takes no new ones", "/llm/nodes/", nodeAction, ""},
	{"POST", "/llm/nodes/{name}/undrain", "Let a drained node take replicas again", "/llm/nodes/", nodeAction, ""},
	{"POST", "/llm/nodes/{name}/upgrade", "Install a release on a node (llmgw ctl cluster upgrade, which drains it first): a multipart/form-data body with the parts tarball (llmgw_<version>_<os>_<arch>.tar.gz), sums (SHA256SUMS) and sig (SHA256SUMS.minisig); the node checks the signature with the keys its config trusts (llmgw's release key and the cluster block's release_key lines), the tarball's sum and platform, replaces its own binary (keeping the old one as .previous) and restarts once its open requests end; 400 names what was refused, and nothing is changed then", "/llm/nodes/", nodeAction, ""},
	{"POST", "/llm/models/{name}/licence/accept", "Accept the licence a model is served under, for a tenant (an organisation, team or project path) or, with no tenant, for everyone: until then the tenant's requests for the model get 403 naming the licence. Recorded in the audit log; the answer is the licence and its acceptances. Tenant admins accept for their own part of the tenancy. 409 for a model with no licence", "/llm/models/", getModel, `{"tenant":"acme/research"}`},
	{"GET", "/llm/presets", "Every preset (shipped with llmgw or the config's): what it adds (engine, source, resources it needs, licence, workflows), whether it is automatic, and its state here: added (with the model), declined (an operator removed its model: never added again by itself), available, or unavailable with why_not (its engine, the room on the nodes)", "/llm/presets", handlePresets, ""},
	{"GET", "/llm/presets/{name}", "One preset as the list shows it, with its whole model definition", "/llm/presets/", handlePresets, ""},
	{"POST", "/llm/presets/{name}/add", "Add a preset's model to the catalog (checked as POST /llm/models is; kept in storage, audited), under the preset's name or the name given; a declined preset is declined no more. 201 with the model's status; 409 when the catalog has the model already, 404 for an unknown preset", "/llm/presets/", handlePresets, `{"name":"optional"}`},
	{"GET", "/llm/licences", "Every model served under a licence: the licence (name, url, text) and for whom it was accepted, by whom and when", "/llm/licences", getLicences, ""},
	{"GET", "/llm/peers", "The peer gateways (federation): each one's url, CA file, prefix, state (up, down, unknown) with the reason it is down, when it was last checked, the catalog names of the models it lists, and the local tenants with a key of their own; never a key", "/llm/peers", getPeers, ""},
	{"GET", "/llm/node", "The node's capacity (memory, cores, GPUs), what its replicas use, and what is free", "/llm/node", getNode, ""},
	{"GET", "/llm/keys", "List API keys (never their secrets), sorted by id. With ?limit=N (default 50, at most 1000), ?after=<id>, ?q=<text in the id or project> or ?under=<org, team or project path> the answer is one page: {\"keys\":[…],\"next\":\"<id to ask after, empty on the last page>\",\"total\":<matching keys>}", "/llm/keys", handleKeys, ""},
	{"POST", "/llm/keys", "Create a key; the answer holds its secret, shown only once. id is optional (default key-<random>); an id is " + catalog.IDRule + ". A tenant admin on llm_admin leaves id out: ids are shared by every tenant. The body is at most 64 KiB", "/llm/keys", handleKeys, `{"project":"org/team/project","id":"optional","limits":{}}`},
	{"GET", "/llm/keys/{id}", "Get a key with its levels and effective limits", "/llm/keys/", handleKey, ""},
	{"DELETE", "/llm/keys/{id}", "Revoke a key created through the API", "/llm/keys/", handleKey, ""},
	{"POST", "/llm/keys/{id}/rotate", "Issue a new secret for a key; the old one stops working", "/llm/keys/", handleKey, ""},
	{"PUT", "/llm/keys/{id}/limits", "Replace the limits of a key created through the API (requests, tokens, budget, concurrency, models, tools; {} removes them); they apply to its next request, and its counters go on (an ancestor's limits still apply)", "/llm/keys/", handleKey, `{"requests_per_minute":60,"tokens_per_minute":100000,"max_concurrent":4}`},
	{"GET", "/llm/usage", "Usage by model of a node: ?org=, ?team=, ?project= or ?key=, with from and to (RFC 3339)", "/llm/usage", getUsage, ""},
	{"GET", "/llm/cache", "Cache entries and outcomes", "/llm/cache", getCacheStats, ""},
	{"POST", "/llm/cache/purge", "Remove cache entries of a model and/or scope", "/llm/cache/purge", purgeCache, `{"model":"optional","scope":"optional"}`},
	{"GET", "/llm/mirror", "The weights mirror: stores and how far each is behind, transfers under way (bytes, rate, time left), the node cache", "/llm/mirror", getMirror, ""},
	{"GET", "/llm/mirror/versions", "List model versions in the mirror and the stores holding each", "/llm/mirror/versions", handleMirrorVersions, ""},
	{"POST", "/llm/mirror/versions", "Add a version from a local path, an http(s) URL or hf://org/repo[@revision][/path]", "/llm/mirror/versions", handleMirrorVersions, `{"model":"m","version":"optional","source":"hf://org/repo","allow_pickle":false,"track":true}`},
	{"GET", "/llm/mirror/versions/{model}/{version}", "A version's manifest: files, sizes, sha256, origin", "/llm/mirror/versions/", handleMirrorVersion, ""},
	{"DELETE", "/llm/mirror/versions/{model}/{version}", "Remove a version from every store (a tombstone keeps it from coming back)", "/llm/mirror/versions/", handleMirrorVersion, ""},
	{"POST", "/llm/mirror/versions/{model}/{version}/verify", "Read every copy of a version and check its sha256", "/llm/mirror/versions/", handleMirrorVersion, ""},
	{"POST", "/llm/mirror/sync", "Reconcile the stores now (?deep=true reads and checks every file)", "/llm/mirror/sync", postMirrorSync, ""},
	{"POST", "/llm/plan", "Plan a model's placement without changing anything: where its replicas would go, the lower-class replicas that would be stopped, what is missing if it does not fit, and its source check; the body is that of POST /llm/models. In a cluster: the nodes the cluster's plan would give its replicas, computed as the leader computes it from the nodes' last heartbeats, and the replicas of other models it would stop", "/llm/plan", postPlan, `{"name":"m","engine":"llamacpp","source":"mirror://m/v1","resources":{"memory":8589934592},"scaling":{"min":1}}`},
	{"GET", "/llm/audit", "The audit log: changes made through the admin API (time, actor, action, fields, node), newest first; ?since= and ?until= (RFC 3339, or a duration ago such as 1h), ?actor=, ?action= (a part of it), ?model=, ?limit= (default 100, at most 1000), ?cursor= (the next of the previous page). In a cluster, every node's changes", "/llm/audit", getAudit, ""},
	{"GET", "/llm/weights", "Each node's weights directory (the mirror's node cache; in a cluster every live node's, asked through the node-to-node endpoint, or ?node=N): the versions the catalog uses (stopped models and models kept with max 0 included) and what a replica holds or a fetch brings in, and the left-over files and versions nothing uses, with their sizes", "/llm/weights", getWeights, ""},
	{"POST", "/llm/weights/prune", "Remove the left-over weights of every node (?node=N: one), what GET /llm/weights lists as unused, never what a catalog model uses, a replica holds or a fetch is bringing in; ?dry_run=true or {\"dry_run\":true} only says what would go", "/llm/weights/prune", postWeightsPrune, `{"dry_run":false}`},
	// Registry updates (updates.go).
	{"GET", "/llm/models/{name}/updates", "A model served from a tracked registry repository (hf:// source, or mirror://<model> of a mirror model added with --track): its current version and commit, the previous version, the commit its revision points at now as of the last check (checked every update_check, default 6h), when it was checked and will be next, and why the check failed; ?check=true asks the registry now. 400 for a model from another kind of source", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/update", "Fetch the commit a model's tracked revision points at now into the mirror, beside the files of its current version, check its sums, make it current, then replace the model's replicas one at a time as a restart does (new replicas start on the new files, old ones drain on the old: no request or stream is cut); the answer is the rollout with the versions it went from and to. 400 not from a tracked source, 409 no update available, 502 the registry or the fetch failed (nothing changed, the old replicas keep serving). In a cluster the version changes once in the shared mirror and every live node replaces its replicas in turn, this one first, each old replica draining before its replacement starts", "/llm/models/", getModel, ""},
	{"POST", "/llm/models/{name}/rollback", "Return a model to its previous version the same way as an update: the previous version is fetched to the node and checked, made current, and the replicas are replaced one at a time (in a cluster on every live node in turn); 409 when there is no previous version", "/llm/models/", getModel, ""},
	// The tenancy tree changed at runtime, and owners' capacities (admin_tenants.go).
	{"GET", "/llm/tenants", "Every level of the tenancy tree (organisations, teams, projects) in tree order: its limits, capacity, what its models use on this node, the models it owns, its keys, and whether it comes from the config file, the API, or both (a file level changed through the API)", "/llm/tenants", handleTenants, ""},
	{"GET", "/llm/tenants/orgs", "List the organisations", "/llm/tenants/", handleTenants, ""},
	{"POST", "/llm/tenants/orgs", "Create an organisation with its limits and capacity; kept in Caddy storage (in a cluster, Redis), in force at once, no reload needed; 201 with the level", "/llm/tenants/", handleTenants, `{"name":"acme","limits":{"requests_per_minute":600,"models":["chat-*"]},"capacity":{"memory":68719476736,"cores":32,"gpus":4,"replicas":10}}`},
	{"GET", "/llm/tenants/orgs/{org}", "Get an organisation", "/llm/tenants/", handleTenants, ""},
	{"PUT", "/llm/tenants/orgs/{org}", "Replace an organisation's limits and capacity (a level of the config file too: the change is laid over the file at every start and reload); llm_quota enforces them from the next request", "/llm/tenants/", handleTenants, `{"limits":{"requests_per_minute":600},"capacity":{"replicas":10}}`},
	{"PATCH", "/llm/tenants/orgs/{org}", "Change an organisation's limits and capacity by a JSON merge patch: a field given replaces, null removes, one left out stays", "/llm/tenants/", handleTenants, `{"limits":{"requests_per_minute":1200}}`},
	{"DELETE", "/llm/tenants/orgs/{org}", "Delete an organisation created through the API; refused (409, with the reason) for a level of the config file and for one that still has teams, keys or models. On a level of the config file, ?overlay=true undoes its runtime changes: the file's limits and capacity apply again", "/llm/tenants/", handleTenants, ""},
	{"GET", "/llm/tenants/orgs/{org}/teams", "List an organisation's teams", "/llm/tenants/", handleTenants, ""},
	{"POST", "/llm/tenants/orgs/{org}/teams", "Create a team in an organisation", "/llm/tenants/", handleTenants, `{"name":"research","limits":{"tokens_per_minute":100000},"capacity":{"gpus":2}}`},
	{"GET", "/llm/tenants/orgs/{org}/teams/{team}", "Get a team", "/llm/tenants/", handleTenants, ""},
	{"PUT", "/llm/tenants/orgs/{org}/teams/{team}", "Replace a team's limits and capacity", "/llm/tenants/", handleTenants, `{"limits":{"tokens_per_minute":100000}}`},
	{"PATCH", "/llm/tenants/orgs/{org}/teams/{team}", "Change a team's limits and capacity by a JSON merge patch", "/llm/tenants/", handleTenants, `{"capacity":{"replicas":4}}`},
	{"DELETE", "/llm/tenants/orgs/{org}/teams/{team}", "Delete a team created through the API (refused as for an organisation)", "/llm/tenants/", handleTenants, ""},
	{"GET", "/llm/tenants/orgs/{org}/teams/{team}/projects", "List a team's projects", "/llm/tenants/", handleTenants, ""},
	{"POST", "/llm/tenants/orgs/{org}/teams/{team}/projects", "Create a project in a team; POST /llm/keys then mints keys in it", "/llm/tenants/", handleTenants, `{"name":"alpha","limits":{"requests_per_minute":60}}`},
	{"GET", "/llm/tenants/orgs/{org}/teams/{team}/projects/{project}", "Get a project", "/llm/tenants/", handleTenants, ""},
	{"PUT", "/llm/tenants/orgs/{org}/teams/{team}/projects/{project}", "Replace a project's limits and capacity", "/llm/tenants/", handleTenants, `{"limits":{"requests_per_minute":60}}`},
	{"PATCH", "/llm/tenants/orgs/{org}/teams/{team}/projects/{project}", "Change a project's limits and capacity by a JSON merge patch", "/llm/tenants/", handleTenants, `{"limits":{"requests_per_minute":120}}`},
	{"DELETE", "/llm/tenants/orgs/{org}/teams/{team}/projects/{project}", "Delete a project created through the API; refused for a level of the config file and while it has keys (revoked ones go with it) or models", "/llm/tenants/", handleTenants, ""},
}

// adminOperations is the admin API's table, in the order the routes and
// the document list them: the app's operations, the traffic history's
// (traffic.go), the request log's (requests.go), the overview's
// (admin_overview.go), the guardrails history's (guardhist.go), and last
// the OpenAPI document, which reads the table. It is built on each call,
// so that no table is written after it is made.
func adminOperations() []operation {
	return slices.Concat(appOperations, processOperations, trafficOperations, requestOperations, overviewOperations, guardHistoryOperations, []operation{
		{"GET", "/llm/openapi.json", "This document", "/llm/openapi.json", getOpenAPI, ""},
	})
}

// Routes returns the admin routes, one per pattern of the table.
func (Admin) Routes() []caddy.AdminRoute {
	seen := map[string]bool{}
	var routes []caddy.AdminRoute
	for _, op := range adminOperations() {
		if !seen[op.pattern] {
			seen[op.pattern] = true
			h := op.handler
			if shared[op.pattern] {
				h = clusterChange(h)
			}
			routes = append(routes, caddy.AdminRoute{Pattern: op.pattern, Handler: h})
		}
	}
	return append(routes, adminroute.Routes(func() (*adminroute.Registry, adminroute.AuditFunc, error) {
		a, err := running() // the routes handlers declared, served by the running app
		if err != nil {
			return nil, nil, err
		}
		return &a.shared.handlers, a.audit, nil
	})...)
}

// RegisterAdmin hands the routes a handler declared under /llm/<prefix>/
// (adminroute.Declare) to h until the returned function is called.
func (a *App) RegisterAdmin(prefix string, h caddy.AdminHandler) func() {
	return a.shared.handlers.Register(prefix, h)
}

// OpenAPI returns the OpenAPI 3 document of the admin API: the llm app's
// routes and those other modules describe (DescribeAdminOperations), each
// with its request and response schemas (apidoc.AppBodies for the app's).
func OpenAPI() map[string]any { return apidoc.Document(DocumentedOperations()) }

// DocumentedOperations are AdminOperations as the document has them.
func DocumentedOperations() []apidoc.Op {
	ops := AdminOperations()
	doc := make([]apidoc.Op, len(ops))
	for i, op := range ops {
		doc[i] = apidoc.Op(op)
	}
	return doc
}

func getOpenAPI(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return apiErr(http.StatusMethodNotAllowed, "use GET")
	}
	return writeJSON(w, OpenAPI())
}
