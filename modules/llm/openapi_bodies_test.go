package llm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/llmgw/llmgw/modules/llm/apidoc"
)

// TestOpenAPIEveryBodyHasSchema fails when an operation of the app's
// table answers without a schema, or takes a body without one, and
// checks that each schema is a component the operation refers to.
func TestOpenAPIEveryBodyHasSchema(t *testing.T) {
	ops := DocumentedOperations()
	for _, miss := range apidoc.Undescribed(ops) {
		t.Error(miss)
	}
	b, _ := json.Marshal(OpenAPI())
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		o := doc.Paths.Find(op.Path).GetOperation(op.Method)
		if o == nil {
			t.Errorf("%s %s is not in the document", op.Method, op.Path)
			continue
		}
		if _, isStatus := op.Response.(apidoc.Status); !isStatus {
			for code, r := range o.Responses.Map() {
				if strings.HasPrefix(code, "2") {
					for media, mt := range r.Value.Content {
						if mt.Schema == nil || !strings.HasPrefix(mt.Schema.Ref, "#/components/schemas/") {
							t.Errorf("%s %s: its %s answer (%s) is not a component", op.Method, op.Path, code, media)
						}
					}
				}
			}
		}
		if op.Request != nil {
			for media, mt := range o.RequestBody.Value.Content {
				if mt.Schema == nil || mt.Schema.Ref == "" || mt.Schema.Value == nil {
					t.Errorf("%s %s: its %s body is not a component", op.Method, op.Path, media)
				}
			}
		}
	}
}
