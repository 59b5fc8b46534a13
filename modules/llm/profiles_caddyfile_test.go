package llm

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

func TestProfilesCaddyfileErrors(t *testing.T) {
	model := func(body string) string { return "llm {\n model chat {\n" + body + "\n }\n}" }
	for _, tc := range []struct {
		name, input, want string
	}{
		{"profile without name", model("  engine sim\n  profile {\n  }"), "wrong argument count"},
		{"profile twice", model("  engine sim\n  profile gpu {\n   gpus 1\n  }\n  profile gpu {\n   cores 2\n  }"), `profile "gpu" is declared twice`},
		{"unknown subdirective", model("  engine sim\n  profile gpu {\n   vram 24GiB\n  }"), `unrecognized profile subdirective "vram"`},
		{"resources block in a profile", model("  engine sim\n  profile gpu {\n   resources {\n    gpus 1\n   }\n  }"), `unrecognized profile subdirective "resources"`},
		{"duplicate gpus", model("  engine sim\n  profile gpu {\n   gpus 1\n   gpus 2\n  }"), `duplicate subdirective "gpus"`},
		{"option twice", model("  engine sim\n  profile gpu {\n   option a 1\n   option a 2\n  }"), `option "a" is set twice`},
		{"bad memory", model("  engine sim\n  profile cpu {\n   memory lots\n  }"), "memory"},
		{"no engine anywhere", model("  source x"), "engine is required (or a provider block or profile with one)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestProfilesCatalogValidation(t *testing.T) {
	gpu := func() *catalog.Profile {
		return &catalog.Profile{Name: "gpu", Engine: "vllm", Resources: &catalog.Resources{GPUs: 1}}
	}
	for _, tc := range []struct {
		name string
		m    *catalog.Model
		want string
	}{
		{"prefer gpu", &catalog.Model{Name: "m", Engine: "sim", Prefer: "gpu", Profiles: []*catalog.Profile{gpu()}}, "prefer \"gpu\": the one choice is cpu"},
		{"prefer without profiles", &catalog.Model{Name: "m", Engine: "sim", Prefer: "cpu"}, "declare them"},
		{"outside provider as a profile", &catalog.Model{Name: "m", Engine: "sim", Profiles: []*catalog.Profile{{Name: "cloud", Engine: "openai"}}}, "declare it as a provider block"},
		{"bad profile name", &catalog.Model{Name: "m", Engine: "sim", Profiles: []*catalog.Profile{{Name: "a b"}}}, "profile name"},
		{"profiles twice in JSON", &catalog.Model{Name: "m", Engine: "sim", Profiles: []*catalog.Profile{gpu(), gpu()}}, `profile "gpu" is declared twice`},
		{"negative gpus", &catalog.Model{Name: "m", Engine: "sim", Profiles: []*catalog.Profile{{Name: "g", Resources: &catalog.Resources{GPUs: -1}}}}, "must not be negative"},
		{"bad engine type", &catalog.Model{Name: "m", Engine: "sim", Profiles: []*catalog.Profile{{Name: "g", Engine: "../x"}}}, "an engine type is"},
		{"no engine", &catalog.Model{Name: "m", Profiles: []*catalog.Profile{{Name: "g"}}}, "engine is required"},
		{"max_output above a profile's context", &catalog.Model{Name: "m", Engine: "sim", MaxOutput: 4096, Profiles: []*catalog.Profile{{Name: "small", ContextLength: 2048}}}, "above its context_length 2048"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.NewCatalog([]*catalog.Model{tc.m})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestProfilesCaddyfile: a model's profiles, their engines, resources
// and options over the model's; the model's engine is the first
// profile's.
func TestProfilesCaddyfile(t *testing.T) {
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm {
		model qwen {
			option temperature 0.2
			option threads 4
			profile gpu {
				engine vllm
				source /models/qwen-awq
				gpus 1
				memory 24GiB
			}
			profile cpu {
				engine llamacpp
				source /models/qwen.gguf
				cores 8
				memory 16GiB
				option threads 8
			}
			prefer cpu
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.NewCatalog(a.Models)
	if err != nil {
		t.Fatal(err)
	}
	m := cat.ByName["qwen"]
	if m.Engine != "vllm" || m.Prefer != "cpu" || m.Shapes() != 2 {
		t.Fatalf("model: engine %q prefer %q shapes %d", m.Engine, m.Prefer, m.Shapes())
	}
	if n := m.Needs(); n.GPUs != 1 || n.Memory != 24<<30 {
		t.Errorf("the model's needs are its first profile's: %+v", n)
	}
	gpu, cpu := m.Shape(0), m.Shape(1)
	if gpu.ProfileName() != "gpu" || gpu.Engine != "vllm" || gpu.EngineSource() != "/models/qwen-awq" || gpu.EngineOptions()["threads"] != "4" {
		t.Errorf("gpu shape: %q %q %q %v", gpu.ProfileName(), gpu.Engine, gpu.EngineSource(), gpu.EngineOptions())
	}
	if cpu.Engine != "llamacpp" || cpu.EngineSource() != "/models/qwen.gguf" || cpu.EngineOptions()["threads"] != "8" ||
		cpu.EngineOptions()["temperature"] != "0.2" || cpu.Needs().Cores != 8 || cpu.Needs().GPUs != 0 {
		t.Errorf("cpu shape: %q %q %v %+v", cpu.Engine, cpu.EngineSource(), cpu.EngineOptions(), cpu.Needs())
	}
	if m.Options["threads"] != "4" {
		t.Errorf("a profile's option changed the model's: %v", m.Options)
	}
	if m.GPUProfileNeed() != 1 {
		t.Errorf("GPUProfileNeed: %d", m.GPUProfileNeed())
	}
	// A change to a profile is a change of the model's replicas.
	k := m.Key("")
	m.Profiles[1].Resources.Cores = 4
	if m.Key("") == k {
		t.Error("changing a profile kept the model's key")
	}
}
