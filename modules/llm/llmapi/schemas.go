package llmapi

import "github.com/llmgw/llmgw/modules/llm/catalog"

// adaptersSchema is the adapters member of a model in the OpenAPI
// document.
var adaptersSchema = map[string]any{"type": "array", "description": "LoRA adapters, each served under its own name; changing them replaces the replicas without downtime",
	"items": obj(map[string]any{
		"name":   typ("string", "the name clients ask for; no model's or other adapter's"),
		"source": typ("string", "a local path, or mirror://model[/version[/file]] (fetched and checked like weights)"),
		"scale":  typ("number", "default 1; llamacpp only (vllm and ollama apply adapters at 1)"),
	}, "name", "source")}

// OverviewSchemas are the schemas of GET /llm/overview.
var OverviewSchemas = map[string]OpSchemas{
	"GET /llm/overview": {Response: obj(map[string]any{
		"at": typ("string", "when the figures were read (RFC 3339)"),
		"models": arr(obj(map[string]any{
			"model":             typ("string", ""),
			"state":             typ("string", "the model's state; empty for a name only the metrics know"),
			"ready":             typ("integer", "ready replicas"),
			"requests":          typ("integer", "requests the router answered since the start, with the prompts the guardrails blocked and the cache's hits"),
			"errors":            typ("integer", "of them, answers with status 400 or above"),
			"prompt_tokens":     typ("integer", ""),
			"completion_tokens": typ("integer", ""),
			"ttft_ms":           typ("number", "mean time to first token of streamed answers, ms"),
			"ttft_p50_ms":       nullTyp("number", "median time to first token, estimated from the histogram's buckets, ms"),
			"tokens_per_second": typ("number", "completion tokens per second of answering time"),
		})),
		"guardrails": obj(map[string]any{
			"checks": arr(obj(map[string]any{
				"check":    typ("string", "the check's name"),
				"stage":    typ("string", "input or output"),
				"outcomes": map[string]any{"type": "object", "additionalProperties": typ("integer", ""), "description": "count per outcome (passed, redacted, blocked, flagged, skipped, errored) since the start"},
			})),
			"findings": arr(obj(map[string]any{
				"check":  typ("string", ""),
				"kind":   typ("string", "what was found: EMAIL, CARD, a pattern's name …"),
				"action": typ("string", "what the check did with it"),
				"count":  typ("integer", "since the start"),
			})),
		}),
	})},
}

// GuardHistorySchemas are the schemas of GET /llm/guardrails/history.
var GuardHistorySchemas = map[string]OpSchemas{
	"GET /llm/guardrails/history": {Response: obj(map[string]any{
		"from":         typ("string", "start of the first step (RFC 3339)"),
		"to":           typ("string", "end of the last step (RFC 3339)"),
		"step_seconds": typ("integer", ""),
		"series": arr(obj(map[string]any{
			"check":   typ("string", ""),
			"stage":   typ("string", "input or output"),
			"outcome": typ("string", "passed, redacted, blocked, flagged, skipped or errored"),
			"counts":  arr(typ("integer", "the outcomes in one step, oldest first")),
		})),
	})},
}

// TrafficSchemas are the schemas of GET /llm/traffic.
var TrafficSchemas = map[string]OpSchemas{
	"GET /llm/traffic": {Response: obj(map[string]any{
		"from":         typ("string", "start of the first step (RFC 3339)"),
		"to":           typ("string", "end of the last step (RFC 3339)"),
		"step_seconds": typ("integer", ""),
		"overall":      trafficSeriesSchema,
		"models":       arr(trafficSeriesSchema),
	})},
}

var trafficSeriesSchema = obj(map[string]any{
	"model": typ("string", "the catalog model; absent in overall"),
	"points": arr(obj(map[string]any{
		"at":                       typ("string", "start of the step (RFC 3339)"),
		"requests":                 typ("integer", "answers in the step"),
		"requests_per_second":      typ("number", "over the step (the last step: its part so far)"),
		"errors":                   typ("integer", "answers with status 500 or above, and 429"),
		"errors_per_second":        typ("number", ""),
		"client_errors":            typ("integer", "the other answers with status 400 or above, among them requests the guardrails blocked"),
		"client_errors_per_second": typ("number", ""),
		"latency_p50_ms":           nullTyp("number", "median time to the answer's last byte, from the histogram's buckets; null without answers"),
		"latency_p95_ms":           nullTyp("number", ""),
		"ttft_p50_ms":              nullTyp("number", "median time to first token of streamed answers; null without any"),
		"ttft_p95_ms":              nullTyp("number", ""),
		"completion_tokens":        typ("integer", ""),
		"tokens_per_second":        typ("number", "completion tokens per second of the step"),
		"replicas_ready":           nullTyp("integer", "the last count of the step, summed over nodes; null when none was sampled"),
	})),
})

// OpSchemas are the request and response schemas of the operations that
// have them in the OpenAPI document, keyed by "METHOD path".
type OpSchemas struct{ Request, Response map[string]any }

func obj(props map[string]any, required ...string) map[string]any {
	o := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		o["required"] = required
	}
	return o
}

func typ(t, desc string) map[string]any {
	o := map[string]any{"type": t}
	if desc != "" {
		o["description"] = desc
	}
	return o
}

// nullTyp is typ for a value that may be null.
func nullTyp(t, desc string) map[string]any {
	o := typ(t, desc)
	o["nullable"] = true
	return o
}

func arr(items map[string]any) map[string]any { return map[string]any{"type": "array", "items": items} }

var (
	amountsSchema = obj(map[string]any{"memory": typ("integer", "bytes"), "cores": typ("integer", ""), "gpus": typ("integer", "")})

	modelRequestSchema = func() map[string]any {
		o := obj(map[string]any{
			"name":           typ("string", "the name clients ask for"),
			"aliases":        arr(typ("string", "")),
			"engine":         typ("string", "sim, openai, llamacpp, ollama, vllm or a plugin's type"),
			"source":         typ("string", "a local path, an http(s) URL, hf://org/repo[@revision][/path] or mirror://model[/version[/file]]"),
			"args":           arr(typ("string", "")),
			"options":        map[string]any{"type": "object", "additionalProperties": typ("string", "")},
			"context_length": typ("integer", ""),
			"max_output":     typ("integer", "the most tokens one answer may have"),
			"scaling": obj(map[string]any{"min": typ("integer", ""), "max": typ("integer", ""),
				"idle_timeout": typ("string", "a duration such as 10m"), "target_concurrency": typ("integer", "")}),
			"resources":    amountsSchema,
			"class":        map[string]any{"type": "string", "enum": []string{catalog.ClassCritical, catalog.ClassStandard, catalog.ClassOpportunistic}},
			"owner":        typ("string", "org/team/project"),
			"fallbacks":    arr(typ("string", "")),
			"canary":       obj(map[string]any{"model": typ("string", ""), "share": typ("number", "")}),
			"price":        obj(map[string]any{"input_per_million": typ("number", ""), "output_per_million": typ("number", "")}),
			"check_source": typ("boolean", "false adds the model without checking its source, for sources only the nodes can reach; default true"),
			"update_check": typ("string", "how often its tracked registry repository is checked for a new commit, a duration such as 6h; default the app's update_check; -1 never"),
			"adapters":     adaptersSchema,
		}, "name", "engine")
		o["additionalProperties"] = false
		return o
	}()

	sourceCheckSchema = obj(map[string]any{
		"kind":    map[string]any{"type": "string", "enum": []string{"local", "url", "registry", "mirror", "none"}},
		"source":  typ("string", "without a URL's query or user info"),
		"checked": typ("boolean", "false when skipped; note says why"),
		"size":    typ("integer", "bytes"),
		"format":  typ("string", "gguf or safetensors, when known"),
		"files":   typ("integer", ""),
		"note":    typ("string", ""),
	}, "kind", "checked")

	planSchema = obj(map[string]any{
		"model":    typ("string", ""),
		"fits":     typ("boolean", "every replica the model starts with would be placed"),
		"replicas": arr(obj(map[string]any{"node": typ("string", ""), "resources": amountsSchema, "gpus": arr(typ("integer", "a GPU device it would be given"))}, "node", "resources")),
		"evict": arr(obj(map[string]any{"model": typ("string", ""), "replica": typ("string", ""),
			"class": typ("string", ""), "resources": amountsSchema}, "model", "replica", "class", "resources")),
		"missing":      amountsSchema,
		"reason":       typ("string", "why it does not fit"),
		"note":         typ("string", ""),
		"node":         obj(map[string]any{"capacity": amountsSchema, "used": amountsSchema, "free": amountsSchema}),
		"source_check": sourceCheckSchema,
		"source_error": typ("string", "why the source check failed; a real add is refused with 422"),
	}, "model", "fits", "replicas", "evict", "node")
)

var auditSchema = obj(map[string]any{
	"entries": arr(obj(map[string]any{
		"id":     typ("string", "orders entries; the cursor of the next page"),
		"time":   typ("string", "RFC 3339"),
		"actor":  typ("string", "who made the change: X-Llmgw-Actor, or the llm_admin token's id"),
		"action": typ("string", "such as model added, model scaled, key created"),
		"node":   typ("string", "the node that made it"),
		"fields": map[string]any{"type": "object", "description": "what changed (model, key, min, max …); never a secret"},
	}, "id", "time", "actor", "action")),
	"next":    typ("string", "the cursor of the next page, when there may be one"),
	"source":  map[string]any{"type": "string", "enum": []string{"cluster", "storage"}},
	"warning": typ("string", "in a cluster whose store does not answer: only this node's entries"),
}, "entries", "source")

var cacheEntrySchema = map[string]any{
	"path":     typ("string", "relative to the weights directory"),
	"model":    typ("string", "the mirror model, for a version"),
	"version":  typ("string", ""),
	"size":     typ("integer", "bytes"),
	"files":    typ("integer", ""),
	"complete": typ("boolean", "fetched and verified whole"),
	"held":     typ("boolean", "a replica holds it or a fetch is bringing it in"),
}

var weightsEntrySchema = func() map[string]any {
	props := map[string]any{"used_by": arr(typ("string", "catalog models")), "why": typ("string", "why it counts as used without a catalog model")}
	for k, v := range cacheEntrySchema {
		props[k] = v
	}
	return obj(props, "path", "size", "files")
}()

var weightsSchema = obj(map[string]any{"nodes": arr(obj(map[string]any{
	"node":         typ("string", ""),
	"dir":          typ("string", "the weights directory"),
	"used":         arr(weightsEntrySchema),
	"unused":       arr(weightsEntrySchema),
	"used_bytes":   typ("integer", ""),
	"unused_bytes": typ("integer", ""),
	"note":         typ("string", ""),
	"error":        typ("string", "why the node could not be asked"),
}, "node", "used", "unused"))}, "nodes")

var pruneSchema = obj(map[string]any{"nodes": arr(obj(map[string]any{
	"node":    typ("string", ""),
	"dry_run": typ("boolean", ""),
	"removed": arr(obj(cacheEntrySchema, "path", "size")),
	"freed":   typ("integer", "bytes"),
	"note":    typ("string", ""),
	"error":   typ("string", "why the node could not be asked or pruned"),
}, "node", "dry_run", "removed", "freed"))}, "nodes")

// rolloutSchema is the answer of a live change and of a restart (with
// replaced and started); a change of routing settings only answers with
// the model's status, the same fields without them.
var rolloutSchema = obj(map[string]any{
	"name":          typ("string", ""),
	"state":         typ("string", ""),
	"replicas":      arr(obj(map[string]any{"id": typ("string", ""), "state": typ("string", "ready, or draining for the replaced ones until their requests end")})),
	"replaced":      arr(typ("string", "replica ids that drain and stop")),
	"started":       arr(typ("string", "replica ids that took their place, ready")),
	"one_at_a_time": typ("boolean", "the node had no room for a new replica beside an old one: each old one drained before its replacement started"),
	"note":          typ("string", "such as: the config file still holds the old values"),
}, "name")

var settingsSchema = func() map[string]any {
	o := obj(map[string]any{
		"class":          map[string]any{"type": "string", "enum": []string{catalog.ClassCritical, catalog.ClassStandard, catalog.ClassOpportunistic}},
		"owner":          typ("string", "org/team/project"),
		"fallbacks":      arr(typ("string", "")),
		"canary":         obj(map[string]any{"model": typ("string", "empty removes the canary"), "share": typ("number", "")}),
		"resources":      amountsSchema,
		"context_length": typ("integer", "replaces the replicas without downtime"),
		"max_output":     typ("integer", "the most tokens one answer may have, from the next request on; 0 removes the limit"),
		"options":        map[string]any{"type": "object", "additionalProperties": typ("string", ""), "description": "merged over the model's; an empty value removes one; replaces the replicas without downtime"},
		"args":           map[string]any{"type": "array", "items": typ("string", ""), "description": "replace the model's; replaces the replicas without downtime"},
		"adapters":       adaptersSchema,
	})
	o["additionalProperties"] = false
	return o
}()

// Schemas are the request and response schemas of the app's admin
// operations, by "METHOD path"; written only in init.
var Schemas = map[string]OpSchemas{
	"POST /llm/models/{name}/settings": {Request: settingsSchema, Response: rolloutSchema},
	"POST /llm/models/{name}/restart":  {Response: rolloutSchema},
	"GET /llm/weights":                 {Response: weightsSchema},
	"POST /llm/weights/prune":          {Request: obj(map[string]any{"dry_run": typ("boolean", "say what would be removed, remove nothing")}), Response: pruneSchema},
	"GET /llm/audit":                   {Response: auditSchema},
	"POST /llm/plan":                   {Request: modelRequestSchema, Response: planSchema},
	"POST /llm/models":                 {Request: modelRequestSchema},
	// Registry updates (updates.go).
	"GET /llm/models/{name}/updates":   {Response: modelUpdatesSchema},
	"POST /llm/models/{name}/update":   {Response: versionRolloutSchema},
	"POST /llm/models/{name}/rollback": {Response: versionRolloutSchema},
	// GPUs as devices: the model listing, with each replica's devices.
	"GET /llm/models":        {Response: arr(modelStatusSchema)},
	"GET /llm/models/{name}": {Response: modelStatusSchema},
	"GET /llm/node": {Response: obj(map[string]any{"capacity": amountsSchema, "used": amountsSchema, "free": amountsSchema,
		"gpu_devices": obj(map[string]any{
			"all":  arr(typ("integer", "a GPU device the node hands out, as CUDA_VISIBLE_DEVICES names it")),
			"free": arr(typ("integer", "a device no replica holds")),
		}, "all", "free"),
	}, "capacity", "used", "free")},
}

// modelUpdatesSchema is the answer of GET /llm/models/{name}/updates.
var modelUpdatesSchema = obj(map[string]any{
	"model":            typ("string", ""),
	"source":           typ("string", "the catalog model's source"),
	"repository":       typ("string", "the hf:// source its mirror model follows"),
	"mirror_model":     typ("string", "the model's name in the mirror"),
	"current":          typ("string", "the mirror version new replicas start on"),
	"current_commit":   typ("string", "the registry commit the current version was fetched from"),
	"previous":         typ("string", "the version a rollback returns to"),
	"available":        typ("string", "the commit the repository's revision points at, as of the last check"),
	"update_available": typ("boolean", "available is not the current commit: POST /llm/models/{name}/update applies it"),
	"checked_at":       typ("string", "RFC 3339; when the registry was last asked"),
	"next_check":       typ("string", "RFC 3339; absent when checks are off"),
	"update_check":     typ("string", "the check interval, or off"),
	"error":            typ("string", "why the last check failed"),
}, "model", "mirror_model", "update_available", "update_check")

// versionRolloutSchema is the answer of an update and a rollback.
var versionRolloutSchema = func() map[string]any {
	props := map[string]any{
		"from":        typ("string", "the version the model served before"),
		"to":          typ("string", "the version its replicas run now"),
		"from_commit": typ("string", ""),
		"to_commit":   typ("string", ""),
	}
	for k, v := range rolloutSchema["properties"].(map[string]any) {
		props[k] = v
	}
	return obj(props, "name", "from", "to", "replaced", "started")
}()

// The tenancy tree changed at runtime, and owners' capacities (admin_tenants.go).
var (
	limitsSchema = obj(map[string]any{
		"requests_per_minute": typ("integer", ""), "tokens_per_minute": typ("integer", ""), "tokens_per_day": typ("integer", ""),
		"budget": typ("number", "in the currency of the catalog's prices"), "budget_period": map[string]any{"type": "string", "enum": []string{"day", "month"}},
		"max_concurrent": typ("integer", ""), "models": arr(typ("string", "a catalog name, alias or glob")),
		"tools": arr(typ("string", "server.tool or a glob")), "tool_calls_per_minute": typ("integer", ""), "tool_calls_per_day": typ("integer", ""),
		"kb_bytes": typ("integer", "bytes of knowledge-base files"), "kb_files": typ("integer", "knowledge-base files"),
		"max_output":   typ("integer", "the most tokens one answer may have"),
		"jobs_per_day": typ("integer", "jobs accepted per UTC day"), "concurrent_jobs": typ("integer", "jobs running at once"),
		"gpu_seconds_per_day": typ("integer", "seconds jobs ran times their replicas' GPUs, per UTC day"),
	})
	capacitySchema = obj(map[string]any{"memory": typ("integer", "bytes"), "cores": typ("integer", ""), "gpus": typ("integer", ""),
		"replicas": typ("integer", "")})
	tenantBodySchema = func() map[string]any {
		o := obj(map[string]any{"name": typ("string", "POST only: the new level's name"), "limits": limitsSchema, "capacity": capacitySchema})
		o["additionalProperties"] = false
		return o
	}()
	tenantLevelSchema = obj(map[string]any{
		"kind": map[string]any{"type": "string", "enum": []string{"org", "team", "project"}},
		"path": typ("string", "acme, acme/research or acme/research/alpha"), "name": typ("string", ""),
		"source":   map[string]any{"type": "string", "enum": []string{"config", "runtime", "config+runtime"}},
		"limits":   limitsSchema,
		"capacity": capacitySchema,
		"used": obj(map[string]any{"memory": typ("integer", "bytes"), "cores": typ("integer", ""), "gpus": typ("integer", ""),
			"replicas": typ("integer", "")}),
		"models":   arr(typ("string", "a model it owns, itself or a level under it")),
		"keys":     typ("integer", "keys not revoked"),
		"children": arr(typ("string", "the path of a level right under it")),
	}, "kind", "path", "name", "source", "used", "keys")
)

// modelStatusSchema is a model's status (ModelStatus), with each
// replica's cores and GPU devices.
var modelStatusSchema = obj(map[string]any{
	"name":           typ("string", ""),
	"aliases":        arr(typ("string", "")),
	"engine":         typ("string", ""),
	"source":         typ("string", ""),
	"state":          typ("string", "ready, starting, waiting, idle, stopped or failed"),
	"reason":         typ("string", "why it is not ready: for a model waiting for GPUs, the devices in use and the replicas holding them"),
	"min":            typ("integer", ""),
	"max":            typ("integer", ""),
	"runtime":        typ("boolean", "added through the admin API"),
	"class":          typ("string", "critical, standard or opportunistic"),
	"owner":          typ("string", ""),
	"resources":      amountsSchema,
	"fallbacks":      arr(typ("string", "")),
	"canary":         obj(map[string]any{"model": typ("string", ""), "share": typ("number", "0 to 1")}),
	"context_length": typ("integer", "its context window in tokens, when it declares one"),
	"max_output":     typ("integer", "the most tokens one answer may have; keys and tenancy levels may set less"),
	"replicas": arr(obj(map[string]any{
		"id":       typ("string", ""),
		"state":    typ("string", "starting, ready or draining"),
		"url":      typ("string", ""),
		"node":     typ("string", "in a cluster, the node it runs on"),
		"pid":      typ("integer", ""),
		"cpus":     arr(typ("integer", "a core it is pinned to (node pin_cores)")),
		"gpus":     arr(typ("integer", "a GPU device it holds, as CUDA_VISIBLE_DEVICES names it; no other replica on its node holds it")),
		"inflight": typ("integer", ""),
		"started":  typ("string", "RFC 3339 time"),
	}, "id", "state", "url", "inflight", "started")),
}, "name", "engine", "state", "min", "max", "class", "replicas")

func init() {
	for _, p := range []string{"/llm/tenants/orgs", "/llm/tenants/orgs/{org}/teams", "/llm/tenants/orgs/{org}/teams/{team}/projects"} {
		Schemas["GET "+p] = OpSchemas{Response: arr(tenantLevelSchema)}
		Schemas["POST "+p] = OpSchemas{Request: tenantBodySchema, Response: tenantLevelSchema}
	}
	Schemas["GET /llm/tenants"] = OpSchemas{Response: arr(tenantLevelSchema)}
	for _, p := range []string{"/llm/tenants/orgs/{org}", "/llm/tenants/orgs/{org}/teams/{team}", "/llm/tenants/orgs/{org}/teams/{team}/projects/{project}"} {
		Schemas["GET "+p] = OpSchemas{Response: tenantLevelSchema}
		Schemas["PUT "+p] = OpSchemas{Request: tenantBodySchema, Response: tenantLevelSchema}
		Schemas["PATCH "+p] = OpSchemas{Request: tenantBodySchema, Response: tenantLevelSchema}
	}
}
