// Package apidoc makes the OpenAPI 3 document of the admin API (GET
// /llm/openapi.json) from the operations the modules register: each
// operation's request and response bodies are described by schemas in
// components/schemas, made from the Go types the handlers write (or by
// hand, where a handler writes a map).
package apidoc

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
)

// Op is one operation of the document.
type Op struct {
	Method, Path, Summary string
	Body                  string // an example request body; "" for none
	BodyType              string // the body's media type; default application/json
	// Request and Response give the bodies' schemas: a value of the Go
	// type the handler reads or writes (its zero value will do), a
	// schema written by hand (map[string]any), or for Response a Status
	// when the answer has no body.
	Request, Response any
	// Code is the status of a successful answer with a body. Default: 200.
	Code int
}

// Status is the answer of an operation that has no JSON body.
type Status int

const (
	NoContent Status = iota + 1 // 204, no body
	Redirect                    // 302 to the Location header
	Stream                      // 200, Server-Sent Events (text/event-stream)
	Text                        // 200, text/plain
	HTML                        // 200, a page for a browser (text/html)
	File                        // 200, a file's bytes, of its own content type
)

// Document returns the OpenAPI 3.0 document of ops.
func Document(ops []Op) map[string]any {
	s := &schemas{components: map[string]any{}, names: map[named]string{}}
	paths := map[string]any{}
	for _, op := range ops {
		p, _ := paths[op.Path].(map[string]any)
		if p == nil {
			p = map[string]any{}
			paths[op.Path] = p
		}
		p[strings.ToLower(op.Method)] = s.describe(op)
	}
	return map[string]any{
		"openapi":    "3.0.3",
		"info":       map[string]any{"title": "llmgw admin API", "version": "1"},
		"paths":      paths,
		"components": map[string]any{"schemas": s.components},
	}
}

// OperationID names an operation after its method and path:
// "GET /llm/models/{name}" is getLlmModelsName.
func OperationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	up := true
	for _, r := range path {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			up = true
			continue
		}
		if up {
			r = unicode.ToUpper(r)
		}
		b.WriteRune(r)
		up = false
	}
	return b.String()
}

// ref puts a body's schema in the components under name and refers to it.
func (s *schemas) ref(name string, sch map[string]any) map[string]any {
	s.components[name] = sch
	return map[string]any{"$ref": "#/components/schemas/" + name}
}

// describe makes the document's entry of one operation.
func (s *schemas) describe(op Op) map[string]any {
	id := OperationID(op.Method, op.Path)
	id0 := strings.ToUpper(id[:1]) + id[1:]
	o := map[string]any{"operationId": id, "summary": op.Summary, "responses": s.responses(op, id0)}
	var params []any
	for _, seg := range strings.Split(op.Path, "/") {
		if strings.HasPrefix(seg, "{") {
			params = append(params, map[string]any{"name": strings.Trim(seg, "{}"), "in": "path", "required": true,
				"schema": map[string]any{"type": "string"}})
		}
	}
	params = append(params, map[string]any{"name": "X-Llmgw-Actor", "in": "header", "required": false,
		"description": "who makes the change, for the audit log", "schema": map[string]any{"type": "string"}})
	o["parameters"] = params
	if op.Body != "" || op.Request != nil {
		media := map[string]any{"schema": map[string]any{"type": "object"}}
		if op.Request != nil {
			s.input = true
			media["schema"] = s.ref(id0+"Request", s.of(op.Request))
			s.input = false
		}
		if op.Body != "" {
			var example any = op.Body
			if json.Valid([]byte(op.Body)) {
				example = json.RawMessage(op.Body)
			}
			media["example"] = example
		}
		o["requestBody"] = map[string]any{"required": true, "content": map[string]any{cmp.Or(op.BodyType, "application/json"): media}}
	}
	return o
}

// responses describes the answer and the errors of an operation.
func (s *schemas) responses(op Op, id0 string) map[string]any {
	errs := map[string]any{"description": "An error, as {\"error\": \"what is wrong and how to fix it\"}",
		"content": map[string]any{"application/json": map[string]any{"schema": s.ref("Error", errorSchema)}}}
	out := map[string]any{"4XX": errs, "5XX": errs}
	switch r := op.Response.(type) {
	case Status:
		switch r {
		case NoContent:
			out["204"] = map[string]any{"description": "Done; no body"}
		case Redirect:
			out["302"] = map[string]any{"description": "A redirect; see the Location header"}
		case Stream:
			out["200"] = map[string]any{"description": "Server-Sent Events", "content": map[string]any{"text/event-stream": map[string]any{
				"schema": s.ref(id0+"Response", map[string]any{"type": "string", "description": "a stream of events"})}}}
		case File:
			out["200"] = map[string]any{"description": "The file, with its Content-Type", "content": map[string]any{"application/octet-stream": map[string]any{
				"schema": map[string]any{"type": "string", "format": "binary"}}}}
		case Text, HTML:
			media := map[Status]string{Text: "text/plain", HTML: "text/html"}[r]
			out["200"] = map[string]any{"description": "OK", "content": map[string]any{media: map[string]any{
				"schema": s.ref(id0+"Response", map[string]any{"type": "string"})}}}
		}
	case nil:
		out["200"] = map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{}}}
	default:
		out[strconv.Itoa(cmp.Or(op.Code, 200))] = map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{
			"schema": s.ref(id0+"Response", s.of(op.Response))}}}
	}
	return out
}

var errorSchema = map[string]any{"type": "object", "required": []string{"error"}, "properties": map[string]any{
	"error": map[string]any{"description": "what is wrong and how to fix it; on /v1 routes an object {message, type, code}"},
}}

// Undescribed lists the operations of ops whose bodies lack a schema: an
// answer with neither a Go type, a schema nor a Status, or a request
// body (an example) without a schema.
func Undescribed(ops []Op) []string {
	var out []string
	for _, op := range ops {
		if op.Response == nil {
			out = append(out, op.Method+" "+op.Path+": no response schema")
		}
		if op.Body != "" && op.Request == nil && op.BodyType == "" {
			out = append(out, op.Method+" "+op.Path+": no request schema")
		}
	}
	return out
}
