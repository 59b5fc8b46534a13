package presets

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// Every shipped preset is a valid model; those of ComfyUI need a GPU and
// name their licence with a URL; each workflow's parameters have
// defaults but for the prompt, the input image and the seed.
func TestShippedPresets(t *testing.T) {
	ps := Shipped()
	if len(ps) < 5 {
		t.Fatalf("%d shipped presets", len(ps))
	}
	for _, p := range ps {
		if err := p.Check(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		m := p.ModelNamed("")
		if m.Name != p.Name || m.Preset != p.Name || p.Description == "" || p.Kind == "" {
			t.Errorf("%s: model %s from %s, description %q, kind %q", p.Name, m.Name, m.Preset, p.Description, p.Kind)
		}
		if m.Engine == "comfyui" && (m.Resources == nil || m.Resources.GPUs < 1 || m.Licence == nil || m.Licence.URL == "") {
			t.Errorf("%s: a ComfyUI preset without a GPU or a licence URL: %+v %+v", p.Name, m.Resources, m.Licence)
		}
		if strings.HasPrefix(p.Name, "sim-") != (m.Engine == "simimage") || (m.Engine == "simimage" && !strings.Contains(p.Description, "simulat")) {
			t.Errorf("%s: a simulator's preset must say so in its name and description", p.Name)
		}
		for _, w := range m.Workflows {
			for _, n := range w.ParamNames() {
				if _, ok := w.Parameters[n]; !ok && n != "prompt" && n != "image" && n != "seed" {
					t.Errorf("%s: workflow %s: parameter %s has no default", p.Name, w.Name, n)
				}
			}
			params := map[string]any{}
			for _, n := range w.ParamNames() {
				if n == "prompt" || n == "image" {
					params[n] = "a fox"
				}
			}
			if _, err := w.Fill(params, func() uint64 { return 7 }); err != nil {
				t.Errorf("%s: workflow %s: %v", p.Name, w.Name, err)
			}
		}
	}
	// A fresh copy each time: changing one changes no other.
	a, b := Shipped()[0], Shipped()[0]
	a.Model.Engine = "changed"
	if b.Model.Engine == "changed" || Shipped()[0].Model.Engine == "changed" {
		t.Error("Shipped shares its presets")
	}
}

func TestParsePreset(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{"preset p {\n engine sim\n kind chat\n automatic\n description \"a model\"\n}", ""},
		{"preset p {\n kind chat\n}", "no engine"},
		{"preset p {\n engine sim\n kind video-game\n}", `kind "video-game"`},
		{"preset p {\n engine sim\n automatic yes\n}", "wrong argument count"},
		{"preset ../p {\n engine sim\n}", "preset name"},
		{"preset p {\n engine sim\n licence x ftp://x\n}", "not an http(s) URL"},
		{"preset p {\n engine sim\n frobnicate\n}", "unrecognized model subdirective"},
	} {
		d := caddyfile.NewTestDispenser(tc.in)
		d.Next()
		p, err := Parse(d)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.in, err, tc.err)
		case err == nil && (p.Name != "p" || !p.Automatic || p.Kind != "chat" || p.Model.Engine != "sim"):
			t.Errorf("%q: %+v", tc.in, p)
		}
	}
}

func TestMergeAndDeclines(t *testing.T) {
	own := []*Preset{{Name: "sim-pictures", Description: "ours"}}
	all := Merge(Shipped(), own)
	for i, p := range all {
		if i > 0 && all[i-1].Name >= p.Name {
			t.Errorf("not sorted: %s before %s", all[i-1].Name, p.Name)
		}
		if p.Name == "sim-pictures" && p.Description != "ours" {
			t.Error("the operator's preset does not replace the shipped one")
		}
	}
	d, err := ParseDeclines(nil)
	if err != nil || d.Has("a") {
		t.Fatal(d, err)
	}
	d = d.With(Decline{Preset: "a", By: "x"}).With(Decline{Preset: "b"}).With(Decline{Preset: "a", By: "y"})
	if len(d) != 2 || !d.Has("a") || d.Without("a").Has("a") || !d.Has("a") {
		t.Errorf("declines: %+v", d)
	}
	if _, err := ParseDeclines([]byte("{")); err == nil {
		t.Error("corrupt declines read")
	}
}
