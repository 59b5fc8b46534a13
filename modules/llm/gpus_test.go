package llm

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/llm/catalog"
)

func TestGPUDevicesCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"node {\n gpu_devices 0,2,3\n }", ""},
		{"node {\n gpu_devices 0 2\n }", ""},
		{"node {\n gpu_devices\n }", "wrong argument count"},
		{"node {\n gpu_devices 0,x\n }", "give GPU indexes"},
		{"node {\n gpu_devices 1,1\n }", "once"},
	} {
		a := &App{}
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		a.Node = new(catalog.Resources)
		err := parseResources(d, a.Node, a)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Fatalf("%q: got %v, want %q", tc.in, err, tc.want)
		}
	}
	d := caddyfile.NewTestDispenser("resources {\n gpu_devices 0\n }")
	d.Next()
	if err := parseResources(d, &catalog.Resources{}, nil); err == nil || !strings.Contains(err.Error(), "node block") {
		t.Fatalf("gpu_devices in a model: got %v", err)
	}
}
