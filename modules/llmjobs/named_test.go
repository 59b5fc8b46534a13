package llmjobs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

func TestNamedWorkflow(t *testing.T) {
	m := &catalog.Model{Name: "studio", Workflows: []*catalog.Workflow{{Name: "txt2img", Graph: json.RawMessage(
		`{"3": {"class_type": "KSampler", "inputs": {"seed": "{{seed}}", "steps": "{{steps}}"}},
		  "5": {"class_type": "EmptyLatentImage", "inputs": {"width": "{{width}}", "height": "{{height}}", "batch_size": "{{batch_size}}"}},
		  "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}}"}}}`),
		Parameters: map[string]any{"steps": json.Number("4"), "width": json.Number("512"), "height": json.Number("512"), "batch_size": json.Number("1")}}}}
	g, msg := namedWorkflow(m, json.RawMessage(`"txt2img"`), map[string]any{"prompt": "a fox", "steps": 9})
	if msg != "" || !strings.Contains(string(g), `"text":"a fox"`) || !strings.Contains(string(g), `"steps":9`) || !strings.Contains(string(g), `"width":512`) {
		t.Errorf("filled: %s %s", g, msg)
	}
	for _, tc := range []struct {
		raw    string
		params map[string]any
		want   string
	}{
		{`"img2img"`, nil, `no workflow "img2img"; its workflows are txt2img`},
		{`"txt2img"`, nil, "needs the parameter prompt"},
		{`"txt2img"`, map[string]any{"prompt": "x", "cfg": 3}, `no parameter "cfg"`},
		{`{"1": {"class_type": "X"}}`, map[string]any{"prompt": "x"}, "parameters go with a workflow's name"},
	} {
		if _, msg := namedWorkflow(m, json.RawMessage(tc.raw), tc.params); !strings.Contains(msg, tc.want) {
			t.Errorf("%s %v: %q, want %q", tc.raw, tc.params, msg, tc.want)
		}
	}
	if _, msg := namedWorkflow(&catalog.Model{Name: "bare"}, json.RawMessage(`"txt2img"`), nil); !strings.Contains(msg, "has no workflows of its own") {
		t.Errorf("a model without workflows: %q", msg)
	}
	g, err := imageWorkflow(m, "a cat", 640, 384, 2)
	if err != nil || !strings.Contains(string(g), `"width":640`) || !strings.Contains(string(g), `"batch_size":2`) || !strings.Contains(string(g), `"steps":4`) {
		t.Errorf("the images request's workflow: %s %v", g, err)
	}
	g, err = imageWorkflow(&catalog.Model{Name: "bare"}, "a cat", 64, 64, 1)
	if err != nil || !strings.Contains(string(g), "bare.safetensors") {
		t.Errorf("the default workflow: %s %v", g, err)
	}
}
