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
	Time time.Time `json:"time"`
	End  time.Time `json:"end"`
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
