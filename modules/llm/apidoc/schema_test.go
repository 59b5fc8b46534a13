package apidoc

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type inner struct {
	N int `json:"n"`
}

type sample struct {
	Name    string            `json:"name"`
	Tags    []string          `json:"tags"`
	Opt     string            `json:"opt,omitempty"`
	At      time.Time         `json:"at"`
	Labels  map[string]string `json:"labels,omitempty"`
	Child   *inner            `json:"child,omitempty"`
	Skipped string            `json:"-"`
	inner
}

// TestSchemaFollowsEncodingJSON checks that a type's schema names the
// fields encoding/json writes, requires those it always writes, lets nil
// slices be null, and puts named structs in the components.
func TestSchemaFollowsEncodingJSON(t *testing.T) {
	doc := Document([]Op{{Method: "GET", Path: "/x", Summary: "x", Response: sample{}}})
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	got, _ := json.Marshal(comps["Sample"])
	want := `{"properties":{"at":{"format":"date-time","type":"string"},"child":{"allOf":[{"$ref":"#/components/schemas/Inner"}],"nullable":true},` +
		`"labels":{"additionalProperties":{"type":"string"},"type":"object"},"n":{"type":"integer"},"name":{"type":"string"},` +
		`"opt":{"type":"string"},"tags":{"items":{"type":"string"},"nullable":true,"type":"array"}},"required":["name","tags","at","n"],"type":"object"}`
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("schema of sample (-want +got):\n%s", diff)
	}
	if comps["GetXResponse"] == nil || comps["Inner"] == nil || comps["Error"] == nil {
		t.Errorf("components: got %v, want GetXResponse, Inner and Error", comps)
	}
}

func TestOperationID(t *testing.T) {
	for in, want := range map[string]string{"GET /llm/models/{name}": "getLlmModelsName", "POST /llm/openapi.json": "postLlmOpenapiJson"} {
		m, p, _ := strings.Cut(in, " ")
		if got := OperationID(m, p); got != want {
			t.Errorf("OperationID(%s): got %s, want %s", in, got, want)
		}
	}
}
