package llm

import (
	"encoding/json"
	"strings"
	"testing"
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
	for _, op := range operations {
		o, ok := doc.Paths[op.path][strings.ToLower(op.method)]
		if !ok || len(o) == 0 || op.summary == "" {
			t.Errorf("%s %s is not described", op.method, op.path)
		}
	}
}
