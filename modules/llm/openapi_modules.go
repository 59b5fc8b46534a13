package llm

import (
	"cmp"

	"github.com/llmgw/llmgw/modules/llm/apidoc"
)

// AdminOperation is one admin route that another module serves (the MCP
// gateway's admin.api.llm_mcp, llm_admin's sign-in routes), described for
// the OpenAPI document that GET /llm/openapi.json answers, so that the
// document lists every admin route of the binary.
type AdminOperation struct {
	Method   string // GET, POST, …
	Path     string // with {parameters}: /llm/mcp/servers/{name}
	Summary  string // what it does, its answer and its errors
	Body     string // an example request body as JSON; "" for none
	BodyType string // the body's media type; default application/json
	// Request and Response give the bodies' schemas: a value of the Go
	// type read or written, a schema (map[string]any), or for Response an
	// apidoc.Status when the answer has no body.
	Request, Response any
	Code              int // the status of a successful answer; default 200
}

// moduleOperations are the operations other modules describe. Written in
// init() only, by DescribeAdminOperations; read afterwards.
var moduleOperations []AdminOperation

// DescribeAdminOperations adds another module's admin routes to the
// OpenAPI document. Call it from the module's init().
func DescribeAdminOperations(ops ...AdminOperation) {
	moduleOperations = append(moduleOperations, ops...)
}

// AdminOperations lists every operation of the OpenAPI document: the llm
// app's, then the other modules'.
func AdminOperations() []AdminOperation {
	ops := adminOperations()
	out := make([]AdminOperation, 0, len(ops)+len(moduleOperations))
	for _, op := range ops {
		b := apidoc.AppBodies(op.method, op.path)
		out = append(out, AdminOperation{Method: op.method, Path: op.path, Summary: op.summary, Body: op.body, Request: b.Request, Response: b.Response, Code: b.Code})
	}
	for _, op := range moduleOperations {
		b := apidoc.AppBodies(op.Method, op.Path) // the schemas llmapi has for it
		if op.Request == nil {
			op.Request = b.Request
		}
		if op.Response == nil {
			op.Response, op.Code = b.Response, cmp.Or(op.Code, b.Code)
		}
		out = append(out, op)
	}
	return out
}
