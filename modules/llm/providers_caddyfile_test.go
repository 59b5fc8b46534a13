package llm

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/google/go-cmp/cmp"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

func TestProvidersCaddyfileErrors(t *testing.T) {
	model := func(body string) string { return "llm {\n model chat {\n  engine sim\n" + body + "\n }\n}" }
	for _, tc := range []struct {
		name, input, want string
	}{
		{"provider without name", model("  provider {\n  }"), "wrong argument count"},
		{"provider twice", model("  provider a {\n   use x\n  }\n  provider a {\n   use y\n  }"), `provider "a" is declared twice`},
		{"provider unknown subdirective", model("  provider a {\n   colour red\n  }"), `unrecognized provider subdirective "colour"`},
		{"provider duplicate price", model("  provider a {\n   use x\n   price input 1\n   price input 2\n  }"), `duplicate subdirective "price"`},
		{"provider odd price", model("  provider a {\n   use x\n   price input\n  }"), "price takes pairs"},
		{"provider duplicate weight", model("  provider a {\n   use x\n   weight 1\n   weight 2\n  }"), `duplicate subdirective "weight"`},
		{"provider without a way to serve", model("  provider a {\n   price input 1 output 2\n  }"), "give an engine (such as openai), model local"},
		{"local with an engine", model("  provider a {\n   model local\n   engine openai\n  }"), "model local is the model's own replicas"},
		{"use with a key", model("  provider a {\n   use x\n   key k\n  }"), "use names a catalog model"},
		{"bad price kind", model("  provider a {\n   use x\n   price dollars 3\n  }"), `price "dollars": use input, output, cached or gpu_hour`},
		{"negative price", model("  provider a {\n   use x\n   price input -1\n  }"), "is not a number of at least 0"},
		{"both prices", model("  provider a {\n   use x\n   price input 1 gpu_hour 2\n  }"), "by the token or by the GPU-hour, not both"},
		{"key with commas", model("  provider a {\n   engine openai\n   key a,b\n  }"), "a key has no commas"},
		{"key weight", model("  provider a {\n   engine openai\n   key k 99\n  }"), "not a whole number from 1 to 16"},
		{"api_key and key", model("  provider a {\n   engine openai\n   key k\n   option api_key j\n  }"), `option "api_key" is set twice`},
		{"rpm zero", model("  provider a {\n   use x\n   rpm 0\n  }"), "at least 1"},
		{"bad explore", model("  explore lots"), `explore "lots" is a share`},
		{"bad latency_objective", model("  latency_objective soon"), `"soon" is not a duration`},
		{"local without an engine", "llm {\n model chat {\n  provider a {\n   model local\n  }\n }\n}", "give the model an engine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "Testfile:") {
				t.Errorf("error %q does not name file and line", err)
			}
		})
	}
}

// TestProvidersCaddyfile: provider blocks become the model's providers
// and, with an engine, catalog models of their own; a model without an
// engine takes its first provider's.
func TestProvidersCaddyfile(t *testing.T) {
	a := new(App)
	err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser(`llm {
		model chat {
			policy cost
			latency_objective 2s
			explore 0
			provider mini {
				engine openai
				option base_url https://api.example.com/v1
				model gpt-4o-mini
				key ka 2
				key kb
				price input 0.15 output 0.60 cached 0.075
				rpm 500
			}
			provider big {
				engine openai
				option base_url https://big.example.com/v1
				model big
				weight 3
			}
			provider other {
				use chat-b
			}
		}
		model chat-b {
			engine sim
			provider local {
				model local
				price gpu_hour 2.5
			}
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*catalog.Model{}
	for _, m := range a.Models {
		got[m.Name] = m
	}
	chat := got["chat"]
	if chat == nil || chat.Engine != "openai" || chat.Options["model"] != "gpt-4o-mini" || chat.Options["api_key"] != "ka,ka,kb" {
		t.Fatalf("chat: got %+v, want the first provider's engine and options (keys by weight)", chat)
	}
	if big := got["chat/big"]; big == nil || big.Options["base_url"] != "https://big.example.com/v1" || big.Options["model"] != "big" || big.Price != nil {
		t.Fatalf("chat/big: got %+v", big)
	}
	wantProviders := []*catalog.Provider{
		{Name: "mini", Model: "chat", RPM: 500, Price: &catalog.ProviderPrice{InputPerMillion: 0.15, OutputPerMillion: 0.6, CachedPerMillion: 0.075}},
		{Name: "big", Model: "chat/big", Weight: 3},
		{Name: "other", Model: "chat-b"},
	}
	if d := cmp.Diff(wantProviders, chat.Providers); d != "" {
		t.Errorf("chat's providers (-want +got):\n%s", d)
	}
	if r := chat.Routing; r.PolicyName() != "cost" || time.Duration(r.LatencyObjective) != 2*time.Second || r.ExploreShare() != 0 {
		t.Errorf("routing: got %+v", r)
	}
	if b := got["chat-b"]; len(b.Providers) != 1 || b.Providers[0].Model != "chat-b" || b.Price != nil {
		t.Errorf("chat-b: got %+v, want its own replicas as provider local", b)
	}
	if _, err := catalog.NewCatalog(a.Models); err == nil || !strings.Contains(err.Error(), `model "chat-b" has providers of its own`) {
		t.Errorf("a provider that is a model with providers: got %v", err)
	}
}

func TestProvidersCatalogValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    *catalog.Model
		want string
	}{
		{"unknown provider model", &catalog.Model{Name: "a", Engine: "sim", Providers: []*catalog.Provider{{Name: "p", Model: "zz"}}}, `model "zz" is not in the catalog`},
		{"bad policy", &catalog.Model{Name: "a", Engine: "sim", Routing: &catalog.Routing{Policy: "cheapest"},
			Providers: []*catalog.Provider{{Name: "p", Model: "a"}}}, "use weighted, cost, latency, usage or first"},
		{"routing without providers", &catalog.Model{Name: "a", Engine: "sim", Routing: &catalog.Routing{Policy: "cost"}}, "a routing policy needs providers"},
		{"provider twice", &catalog.Model{Name: "a", Engine: "sim", Providers: []*catalog.Provider{{Name: "p", Model: "a"}, {Name: "p", Model: "a"}}}, `provider "p" is declared twice`},
		{"negative weight", &catalog.Model{Name: "a", Engine: "sim", Providers: []*catalog.Provider{{Name: "p", Model: "a", Weight: -1}}}, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.NewCatalog([]*catalog.Model{tc.m})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
