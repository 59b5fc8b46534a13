package llm

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestOpenAPICoversEveryRoute fails when an admin route is served that the
// document does not describe.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	b, err := json.Marshal(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("not an OpenAPI 3 document: %v %s", err, doc.OpenAPI)
	}
	for _, r := range (Admin{}).Routes() {
		covered := false
		for p := range doc.Paths {
			if p == r.Pattern || strings.HasSuffix(r.Pattern, "/") && strings.HasPrefix(p, r.Pattern) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("route %s is not in the OpenAPI document", r.Pattern)
		}
		if r.Handler == nil {
			t.Errorf("route %s has no handler", r.Pattern)
		}
	}
	for _, op := range adminOperations() {
		o, ok := doc.Paths[op.path][strings.ToLower(op.method)]
		if !ok || len(o) == 0 || op.summary == "" {
			t.Errorf("%s %s is not described", op.method, op.path)
		}
	}
}

// TestOpenAPIValidates loads the document with an OpenAPI 3 implementation
// and validates it against the specification: schemas, references,
// parameters and responses.
func TestOpenAPIValidates(t *testing.T) {
	b, err := json.Marshal(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(b)
	if err != nil {
		t.Fatalf("loading the document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid OpenAPI 3: %v", err)
	}
	for _, op := range adminOperations() {
		item := doc.Paths.Find(op.path)
		if item == nil || item.GetOperation(op.method) == nil {
			t.Errorf("%s %s is missing after loading", op.method, op.path)
			continue
		}
		if o := item.GetOperation(op.method); o.Responses == nil || o.Responses.Len() == 0 {
			t.Errorf("%s %s has no responses", op.method, op.path)
		}
	}
}

// TestOpenAPIPlanSchemas checks that POST /llm/plan documents its body and
// its answer, with the fields a client reads.
func TestOpenAPIPlanSchemas(t *testing.T) {
	b, _ := json.Marshal(OpenAPI())
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	op := doc.Paths.Find("/llm/plan").GetOperation("POST")
	req := op.RequestBody.Value.Content.Get("application/json").Schema.Value
	for _, f := range []string{"name", "engine", "source", "check_source"} {
		if req.Properties[f] == nil {
			t.Errorf("request schema lacks %s", f)
		}
	}
	resp := op.Responses.Value("200").Value.Content.Get("application/json").Schema.Value
	for _, f := range []string{"fits", "replicas", "evict", "missing", "source_check"} {
		if resp.Properties[f] == nil {
			t.Errorf("response schema lacks %s", f)
		}
	}
}

// TestOpenAPILifecycleSchemas checks that the audit log and the weights
// routes document their answers, with the fields ctl reads.
func TestOpenAPILifecycleSchemas(t *testing.T) {
	b, _ := json.Marshal(OpenAPI())
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path string
		fields       []string
	}{
		{"GET", "/llm/audit", []string{"entries", "next", "source"}},
		{"GET", "/llm/weights", []string{"nodes"}},
		{"POST", "/llm/weights/prune", []string{"nodes"}},
	} {
		op := doc.Paths.Find(tc.path).GetOperation(tc.method)
		if op == nil {
			t.Errorf("%s %s is not in the document", tc.method, tc.path)
			continue
		}
		resp := op.Responses.Value("200").Value.Content.Get("application/json").Schema.Value
		for _, f := range tc.fields {
			if resp.Properties[f] == nil {
				t.Errorf("%s %s: response schema lacks %s", tc.method, tc.path, f)
			}
		}
	}
	entry := doc.Paths.Find("/llm/audit").GetOperation("GET").Responses.Value("200").Value.Content.Get("application/json").Schema.Value.Properties["entries"].Value.Items.Value
	for _, f := range []string{"id", "time", "actor", "action", "node", "fields"} {
		if entry.Properties[f] == nil {
			t.Errorf("audit entry schema lacks %s", f)
		}
	}
}

// TestAdminTableOrder checks the admin table: the overview and the
// guardrails history are routes of it, before the OpenAPI document, which
// comes last, and building it twice gives the same table.
func TestAdminTableOrder(t *testing.T) {
	ops := adminOperations()
	var paths []string
	for _, op := range ops {
		paths = append(paths, op.method+" "+op.path)
	}
	tail := paths[len(paths)-3:]
	want := []string{"GET /llm/overview", "GET /llm/guardrails/history", "GET /llm/openapi.json"}
	if strings.Join(tail, ", ") != strings.Join(want, ", ") {
		t.Errorf("the table ends with %v, want %v", tail, want)
	}
	if again := adminOperations(); len(again) != len(ops) {
		t.Errorf("the table has %d operations, then %d", len(ops), len(again))
	}
	patterns := map[string]bool{}
	for _, r := range (Admin{}).Routes() {
		if patterns[r.Pattern] {
			t.Errorf("route %s is served twice", r.Pattern)
		}
		patterns[r.Pattern] = true
	}
	for _, p := range []string{"/llm/overview", "/llm/guardrails/history", "/llm/openapi.json", "/llm/audit"} {
		if !patterns[p] {
			t.Errorf("no route %s", p)
		}
	}
}
