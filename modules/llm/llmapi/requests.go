package llmapi

import "time"

// RequestRecord is one request in the request log (GET /llm/requests):
// who asked what, where it went and how it ended. It never holds a key's
// secret; bodies, when the tenant keeps them, are read one request at a
// time (GET /llm/requests/{id}).
type RequestRecord struct {
	// ID is the request id, answered to the client in X-Request-Id.
	ID string `json:"id"`
	// Time is when the request arrived; End when its answer ended.
	Time time.Time `json:"time,omitzero"`
	End  time.Time `json:"end,omitzero"`
	// Node is the node that took the request.
	Node string `json:"node,omitempty"`
	// API is chat/completions, completions, embeddings, responses,
	// messages or mcp.
	API string `json:"api,omitempty"`
	// KeyID and Tenant (org/team/project) are the key's, with llm_quota.
	KeyID  string `json:"key_id,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// Model is the model as asked; Served the catalog model that
	// answered, reached as Route says (fallback, canary) when not the one
	// asked.
	Model   string `json:"model,omitempty"`
	Served  string `json:"served,omitempty"`
	Route   string `json:"route,omitempty"`
	Replica string `json:"replica,omitempty"`
	// ReplicaNode is the node the replica runs on.
	ReplicaNode string `json:"replica_node,omitempty"`
	Engine      string `json:"engine,omitempty"`
	Stream      bool   `json:"stream,omitempty"`
	Status      int    `json:"status"`
	// Error is the error's code (model_not_found, rate_limit_exceeded,
	// upstream_unreachable, …) when the answer was an error.
	Error            string  `json:"error,omitempty"`
	PromptTokens     int64   `json:"prompt_tokens,omitempty"`
	CompletionTokens int64   `json:"completion_tokens,omitempty"`
	CachedTokens     int64   `json:"cached_tokens,omitempty"`
	Cost             float64 `json:"cost,omitempty"`
	// LatencyMS is from arrival to the answer's end; TTFTMS to its first
	// byte.
	LatencyMS float64 `json:"latency_ms"`
	TTFTMS    float64 `json:"ttft_ms,omitempty"`
	// Cache is the cache's outcome (hit, semantic_hit, miss, bypass, …).
	Cache string `json:"cache,omitempty"`
	// Guard is the guardrails' outcomes (check/stage:outcome …).
	Guard string `json:"guard,omitempty"`
	// Tool is an MCP tool call's tool (server.tool).
	Tool string `json:"tool,omitempty"`
	// KB names the vector stores searched.
	KB string `json:"kb,omitempty"`
	// Bodies says the request's bodies were kept.
	Bodies bool `json:"bodies,omitempty"`
}

// RequestPage is a page of the request log, newest first (or, with
// after=, oldest first from the cursor, for following).
type RequestPage struct {
	Object string          `json:"object"` // "list"
	Data   []RequestRecord `json:"data"`
	// Next is the cursor of the following page (before= or after=), ""
	// when there is none yet.
	Next    string `json:"next,omitempty"`
	HasMore bool   `json:"has_more"`
	// Newest is the cursor of the newest record read, on a page read
	// newest first: after= it follows what comes next.
	Newest string `json:"newest,omitempty"`
	// Scanned counts the records read to fill the page; a page stops
	// early (HasMore, with Next) when it scanned the most one page may.
	Scanned int `json:"scanned"`
}

// RequestDetail is one request with its bodies, when kept.
type RequestDetail struct {
	RequestRecord
	RequestBody  string `json:"request_body,omitempty"`
	ResponseBody string `json:"response_body,omitempty"`
	// BodiesTruncated says a body was cut at the log's bound.
	BodiesTruncated bool `json:"bodies_truncated,omitempty"`
}

// requestRecordSchema is RequestRecord's schema.
func requestRecordSchema() map[string]any {
	p := map[string]any{
		"id": typ("string", "the request id (req_…), the X-Request-Id of its answer"), "time": typ("string", "arrival (RFC 3339)"),
		"end": typ("string", "the answer's end (RFC 3339)"), "node": typ("string", "the node that took it"),
		"api": typ("string", "chat/completions, completions, embeddings, responses, messages, mcp…"), "key_id": typ("string", ""),
		"tenant": typ("string", "org/team/project"), "model": typ("string", "as asked"), "served": typ("string", "the catalog model that answered"),
		"route": typ("string", "fallback or canary when not the model asked"), "replica": typ("string", ""), "replica_node": typ("string", ""),
		"engine": typ("string", ""), "stream": typ("boolean", ""), "status": typ("integer", "HTTP status"), "error": typ("string", "the error's code"),
		"prompt_tokens": typ("integer", ""), "completion_tokens": typ("integer", ""), "cached_tokens": typ("integer", ""),
		"cost": typ("number", "at the catalog's prices"), "latency_ms": typ("number", ""), "ttft_ms": typ("number", "to the answer's first byte"),
		"cache": typ("string", "the cache's outcome"), "guard": typ("string", "the guardrails' outcomes"), "tool": typ("string", "an MCP tool call's tool"),
		"kb": typ("string", "the vector stores searched"), "bodies": typ("boolean", "its bodies are kept"),
	}
	return obj(p, "id", "time", "end", "status", "latency_ms")
}

// RequestSchemas are the schemas of the request log's routes.
var RequestSchemas = map[string]OpSchemas{
	"GET /llm/requests": {Response: obj(map[string]any{
		"object": typ("string", "list"), "data": arr(requestRecordSchema()),
		"next": typ("string", "the cursor of the next page: before= (or after= when following)"), "has_more": typ("boolean", ""),
		"newest": typ("string", "the cursor of the newest record read, to follow with after="), "scanned": typ("integer", "records read for the page"),
	})},
	"GET /llm/requests/{id}": {Response: func() map[string]any {
		s := requestRecordSchema()
		props := s["properties"].(map[string]any)
		props["request_body"] = typ("string", "as forwarded to the model, after redaction; when kept")
		props["response_body"] = typ("string", "as the model gave it; when kept")
		props["bodies_truncated"] = typ("boolean", "cut at 64 KiB")
		return s
	}()},
}
