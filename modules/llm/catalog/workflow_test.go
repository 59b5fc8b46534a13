package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestWorkflowFill(t *testing.T) {
	w := &Workflow{Name: "txt2img", Graph: json.RawMessage(`{
		"3": {"class_type": "KSampler", "inputs": {"seed": "{{seed}}", "steps": "{{steps}}", "cfg": 7, "positive": ["6", 0]}},
		"6": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}}", "note": "{{ not a param }}", "big": 156680208700286}}}`),
		Parameters: map[string]any{"steps": json.Number("20")}}
	if err := w.check("m"); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.ParamNames(), ","); got != "prompt,seed,steps" {
		t.Errorf("parameters %s", got)
	}
	out, err := w.Fill(map[string]any{"prompt": `a "quoted" <fox> & {{steps}}`}, func() uint64 { return 42 })
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]struct{ Inputs map[string]any }
	if err := json.Unmarshal(out, &g); err != nil {
		t.Fatal(err)
	}
	in := g["3"].Inputs
	if in["seed"] != 42.0 || in["steps"] != 20.0 || in["cfg"] != 7.0 || g["6"].Inputs["text"] != `a "quoted" <fox> & {{steps}}` || g["6"].Inputs["note"] != "{{ not a param }}" {
		t.Errorf("filled: %s", out)
	}
	if !strings.Contains(string(out), "156680208700286") {
		t.Errorf("a big number lost its digits: %s", out)
	}
	if _, err := w.Fill(map[string]any{"prompt": "x", "stepz": 3}, nil); err == nil || !strings.Contains(err.Error(), `no parameter "stepz"`) {
		t.Errorf("an unknown parameter: %v", err)
	}
	if _, err := w.Fill(nil, func() uint64 { return 1 }); err == nil || !strings.Contains(err.Error(), "needs the parameter prompt") {
		t.Errorf("a missing parameter: %v", err)
	}
	for _, bad := range []string{`[]`, `{}`, `{"1": {"inputs": {}}}`, `nope`} {
		if err := (&Workflow{Name: "w", Graph: json.RawMessage(bad)}).check("m"); err == nil {
			t.Errorf("graph %s accepted", bad)
		}
	}
}
