package llm

import (
	"time"

	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"argument on llm", `llm foo`, "wrong argument count"},
		{"unknown subdirective", "llm {\n bogus 1\n}", `unrecognized llm subdirective "bogus"`},
		{"duplicate plugin_dir", "llm {\n plugin_dir a\n plugin_dir b\n}", `duplicate subdirective "plugin_dir"`},
		{"plugin_dir without value", "llm {\n plugin_dir\n}", "wrong argument count"},
		{"plugin_dir with two values", "llm {\n plugin_dir a b\n}", "wrong argument count"},
		{"bad hold_timeout", "llm {\n hold_timeout soon\n}", `"soon" is not a duration`},
		{"negative start_timeout", "llm {\n start_timeout -1s\n}", `"-1s" is not a duration`},
		{"bad max_waiting", "llm {\n max_waiting 0\n}", "not a whole number of at least 1"},
		{"engine without type", "llm {\n engine\n}", "wrong argument count"},
		{"engine with two types", "llm {\n engine a b\n}", "wrong argument count"},
		{"engine twice", "llm {\n engine a\n engine a\n}", `engine "a" is configured twice`},
		{"engine unknown subdirective", "llm {\n engine a {\n  colour red\n }\n}", `unrecognized engine subdirective "colour"`},
		{"engine duplicate path", "llm {\n engine a {\n  path x\n  path y\n }\n}", `duplicate subdirective "path"`},
		{"engine sha256 without value", "llm {\n engine a {\n  sha256\n }\n}", "wrong argument count"},
		{"model without name", "llm {\n model\n}", "wrong argument count"},
		{"model with two names", "llm {\n model a b\n}", "wrong argument count"},
		{"model without engine", "llm {\n model a {\n  source x\n }\n}", `model "a": engine is required`},
		{"model unknown subdirective", "llm {\n model a {\n  engine sim\n  colour red\n }\n}", `unrecognized model subdirective "colour"`},
		{"model duplicate engine", "llm {\n model a {\n  engine sim\n  engine sim\n }\n}", `duplicate subdirective "engine"`},
		{"model alias without names", "llm {\n model a {\n  alias\n }\n}", "wrong argument count"},
		{"model args without values", "llm {\n model a {\n  args\n }\n}", "wrong argument count"},
		{"model option without value", "llm {\n model a {\n  option k\n }\n}", "wrong argument count"},
		{"model option with three values", "llm {\n model a {\n  option k v w\n }\n}", "wrong argument count"},
		{"model option twice", "llm {\n model a {\n  option k v\n  option k w\n }\n}", `option "k" is set twice`},
		{"model bad context_length", "llm {\n model a {\n  context_length big\n }\n}", "not a whole number"},
		{"model max_output zero", "llm {\n model a {\n  max_output 0\n }\n}", "not a whole number of at least 1"},
		{"model max_output not a number", "llm {\n model a {\n  max_output 4k\n }\n}", `"4k" is not a whole number`},
		{"model max_output without value", "llm {\n model a {\n  max_output\n }\n}", "wrong argument count"},
		{"model max_output two values", "llm {\n model a {\n  max_output 1 2\n }\n}", "wrong argument count"},
		{"model max_output twice", "llm {\n model a {\n  engine sim\n  max_output 1\n  max_output 2\n }\n}", `duplicate subdirective "max_output"`},
		{"model max_output over context_length", "llm {\n model a {\n  engine sim\n  context_length 2048\n  max_output 4096\n }\n}", `model "a": max_output 4096 is above its context_length 2048`},
		{"model negative min", "llm {\n model a {\n  min -1\n }\n}", "not a whole number of at least 0"},
		{"model negative max", "llm {\n model a {\n  max -1\n }\n}", "not a whole number of at least 0"},
		{"audit unknown subdirective", "llm {\n audit {\n  forever 1\n }\n}", "unrecognized audit subdirective"},
		{"audit bad keep", "llm {\n audit {\n  keep always\n }\n}", `"always" is not a duration`},
		{"model bad idle_timeout", "llm {\n model a {\n  idle_timeout forever\n }\n}", `"forever" is not a duration`},
		{"model bad target_concurrency", "llm {\n model a {\n  target_concurrency 0\n }\n}", "at least 1"},
		{"model fallback without names", "llm {\n model a {\n  fallback\n }\n}", "wrong argument count"},
		{"model source without value", "llm {\n model a {\n  source\n }\n}", "wrong argument count"},
		{"model check_source bad value", "llm {\n model a {\n  check_source no\n }\n}", `check_source "no": use on or off`},
		{"model check_source without value", "llm {\n model a {\n  check_source\n }\n}", "wrong argument count"},
		{"update_check bad value", "llm {\n update_check never\n}", `update_check "never": use a duration such as 6h, or off`},
		{"model update_check zero", "llm {\n model a {\n  update_check 0s\n }\n}", `update_check "0s": use a duration`},
		{"model canary without share", "llm {\n model a {\n  canary b\n }\n}", "wrong argument count"},
		{"model canary bad share", "llm {\n model a {\n  canary b 0.1\n }\n}", `canary share "0.1" is not a percentage such as 10%`},
		{"model canary over 100", "llm {\n model a {\n  canary b 150%\n }\n}", "is not a percentage"},
		{"node unknown subdirective", "llm {\n node {\n  colour red\n }\n}", `unrecognized node subdirective "colour"; use memory, cores, gpus, gpu_devices or pin_cores`},
		{"node pin_cores with a value", "llm {\n node {\n  pin_cores yes\n }\n}", "wrong argument count"},
		{"pin_cores in a model", "llm {\n model a {\n  resources {\n   pin_cores\n  }\n }\n}", "pin_cores belongs in the node block"},
		{"mirror argument", "llm {\n mirror x\n}", "wrong argument count"},
		{"mirror twice", "llm {\n mirror\n mirror\n}", `duplicate subdirective "mirror"`},
		{"mirror unknown subdirective", "llm {\n mirror {\n  colour red\n }\n}", `unrecognized mirror subdirective "colour"`},
		{"mirror store without type", "llm {\n mirror {\n  store a\n }\n}", "give its type, dir <path> or s3"},
		{"mirror store bad type", "llm {\n mirror {\n  store a ftp\n }\n}", `type "ftp" is not dir or s3`},
		{"mirror dir store without path", "llm {\n mirror {\n  store a dir\n }\n}", "a dir store needs a path"},
		{"mirror store twice", "llm {\n mirror {\n  store a dir /x\n  store a dir /y\n }\n}", `store "a" is configured twice`},
		{"mirror three stores", "llm {\n mirror {\n  store a dir /x\n  store b dir /y\n  store c dir /z\n }\n}", "one or two stores, not 3"},
		{"mirror s3 without bucket", "llm {\n mirror {\n  store a s3 {\n   endpoint h:1\n  }\n }\n}", "needs endpoint and bucket"},
		{"mirror s3 unknown", "llm {\n mirror {\n  store a s3 {\n   colour red\n  }\n }\n}", `unrecognized s3 store subdirective "colour"`},
		{"mirror s3 bad part_size", "llm {\n mirror {\n  store a s3 {\n   part_size big\n  }\n }\n}", "not a size such as 16MiB"},
		{"mirror bad cache size", "llm {\n mirror {\n  cache /c lots\n }\n}", "not a size such as 200GiB"},
		{"mirror bad verify_every", "llm {\n mirror {\n  verify_every -2\n }\n}", "at least -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := caddyfile.NewTestDispenser(tc.input)
			err := new(App).UnmarshalCaddyfile(d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), "Testfile:") {
				t.Errorf("error %q does not name file and line", err)
			}
		})
	}
}

func TestParseGlobalOptionTwice(t *testing.T) {
	d := caddyfile.NewTestDispenser("llm {\n}")
	if _, err := parseGlobalOption(d, struct{}{}); err == nil {
		t.Error("a second llm option was accepted")
	}
}

func TestCatalogValidation(t *testing.T) {
	zero := 0
	for _, tc := range []struct {
		name   string
		models []*catalog.Model
		want   string
	}{
		{"no name", []*catalog.Model{{Engine: "sim"}}, "model name is empty"},
		{"no engine", []*catalog.Model{{Name: "a"}}, "engine is required"},
		{"duplicate name", []*catalog.Model{{Name: "a", Engine: "sim"}, {Name: "a", Engine: "sim"}}, `"a" is used twice`},
		{"alias clash", []*catalog.Model{{Name: "a", Engine: "sim"}, {Name: "b", Engine: "sim", Aliases: []string{"a"}}}, `"a" is used twice`},
		{"unknown fallback", []*catalog.Model{{Name: "a", Engine: "sim", Fallbacks: []string{"z"}}}, `fallback "z" is not in the catalog`},
		{"self fallback", []*catalog.Model{{Name: "a", Engine: "sim", Aliases: []string{"b"}, Fallbacks: []string{"b"}}}, "its own fallback"},
		{"max below min", []*catalog.Model{{Name: "a", Engine: "sim", Scaling: &catalog.Scaling{Min: intp(3), Max: intp(2)}}}, "max (2) is below min (3)"},
		{"whitespace", []*catalog.Model{{Name: "a b", Engine: "sim"}}, `model name "a b" has ' '; a name is 1 to 128 characters`},
		{"dot-dot", []*catalog.Model{{Name: "../../x", Engine: "sim"}}, `model name "../../x" has a ".." part`},
		{"long", []*catalog.Model{{Name: strings.Repeat("a", 1<<20), Engine: "sim"}}, `(1048512 bytes more) is 1048576 bytes long`},
		{"bad alias", []*catalog.Model{{Name: "a", Engine: "sim", Aliases: []string{"/x"}}}, `model "a": alias "/x" has an empty part`},
		{"engine path", []*catalog.Model{{Name: "a", Engine: "../../bin/sh"}}, `engine "../../bin/sh": an engine type is`},
		{"long arg", []*catalog.Model{{Name: "a", Engine: "sim", Args: []string{strings.Repeat("a", 5000)}}}, `arg "aaaa`},
		{"long option", []*catalog.Model{{Name: "a", Engine: "sim", Options: map[string]string{"ttft": strings.Repeat("1", 70000)}}}, `option "ttft": names are at most 128 bytes and values 65536`},
		{"negative max_output", []*catalog.Model{{Name: "a", Engine: "sim", MaxOutput: -1}}, `model "a": max_output -1 must not be negative`},
		{"max_output over context", []*catalog.Model{{Name: "a", Engine: "sim", ContextLength: 100, MaxOutput: 101}}, "max_output 101 is above its context_length 100"},
		{"ok max_output", []*catalog.Model{{Name: "a", Engine: "sim", ContextLength: 100, MaxOutput: 100}}, ""},
		{"ok names", []*catalog.Model{{Name: "Qwen/Qwen2.5-7B", Engine: "sim", Aliases: []string{"gpt-4o-mini", "llama3.2:1b", "a_b"}}}, ""},
		{"ok on demand", []*catalog.Model{{Name: "a", Engine: "sim", Scaling: &catalog.Scaling{Min: &zero}}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := catalog.NewCatalog(tc.models)
			if tc.want == "" {
				if err != nil {
					t.Errorf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func intp(n int) *int { return &n }

func TestClosestNames(t *testing.T) {
	c, err := catalog.NewCatalog([]*catalog.Model{
		{Name: "llama-3-8b", Engine: "sim", Aliases: []string{"llama"}},
		{Name: "qwen-2.5-7b", Engine: "sim"},
		{Name: "gpt-4o-mini", Engine: "sim"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"llama-3-7b", "llama-3-8b"},
		{"gpt-4o", "gpt-4o-mini"},
		{"qwen", "qwen-2.5-7b"},
		{"something-else-entirely", ""},
	} {
		got := strings.Join(c.Closest(tc.in, 1), ",")
		if got != tc.want {
			t.Errorf("closest(%q): got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOrgCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"org without name", "llm {\n org\n}", "wrong argument count"},
		{"org two names", "llm {\n org a b\n}", "wrong argument count"},
		{"unknown limit", "llm {\n org a {\n  colour red\n }\n}", `unrecognized subdirective "colour"`},
		{"duplicate limit", "llm {\n org a {\n  requests_per_minute 1\n  requests_per_minute 2\n }\n}", `duplicate subdirective "requests_per_minute"`},
		{"bad rpm", "llm {\n org a {\n  requests_per_minute none\n }\n}", "not a whole number"},
		{"bad budget", "llm {\n org a {\n  budget lots\n }\n}", `budget "lots"`},
		{"bad budget period", "llm {\n org a {\n  budget 5 year\n }\n}", `budget period "year"`},
		{"budget args", "llm {\n org a {\n  budget\n }\n}", "wrong argument count"},
		{"bad max_output", "llm {\n org a {\n  max_output lots\n }\n}", `"lots" is not a whole number`},
		{"zero max_output", "llm {\n org a {\n  team t {\n   max_output 0\n  }\n }\n}", "not a whole number of at least 1"},
		{"duplicate max_output", "llm {\n org a {\n  team t {\n   project p {\n    key k h {\n     max_output 1\n     max_output 2\n    }\n   }\n  }\n }\n}", `duplicate subdirective "max_output"`},
		{"max_output without value", "llm {\n org a {\n  team t {\n   project p {\n    max_output\n   }\n  }\n }\n}", "wrong argument count"},
		{"models without names", "llm {\n org a {\n  models\n }\n}", "wrong argument count"},
		{"team without name", "llm {\n org a {\n  team\n }\n}", "wrong argument count"},
		{"team unknown", "llm {\n org a {\n  team t {\n   key x y\n  }\n }\n}", `unrecognized subdirective "key"`},
		{"project without name", "llm {\n org a {\n  team t {\n   project\n  }\n }\n}", "wrong argument count"},
		{"key without hash", "llm {\n org a {\n  team t {\n   project p {\n    key k\n   }\n  }\n }\n}", "wrong argument count"},
		{"key limit unknown", "llm {\n org a {\n  team t {\n   project p {\n    key k h {\n     team x\n    }\n   }\n  }\n }\n}", `unrecognized subdirective "team"`},
		{"price one value", "llm {\n model m {\n  engine sim\n  price 1\n }\n}", "wrong argument count"},
		{"price not a number", "llm {\n model m {\n  engine sim\n  price a b\n }\n}", "per million tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(App).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckSourceOff(t *testing.T) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm {\n model a {\n  engine ollama\n  check_source off\n }\n model b {\n  engine ollama\n }\n}")); err != nil {
		t.Fatal(err)
	}
	if c := a.Models[0].CheckSource; c == nil || *c {
		t.Errorf("check_source off: got %v, want false", c)
	}
	if a.Models[1].CheckSource != nil {
		t.Error("no check_source: want the default (nil)")
	}
}

func TestUpdateCheck(t *testing.T) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm {\n update_check 2h\n model a {\n  engine sim\n  update_check off\n }\n model b {\n  engine sim\n }\n model c {\n  engine sim\n  update_check 5m\n }\n}")); err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{0, 2 * time.Hour, 5 * time.Minute} {
		if got := a.updateEvery(a.Models[i]); got != want {
			t.Errorf("model %s: checked every %v, want %v (0: off)", a.Models[i].Name, got, want)
		}
	}
	if got := new(App).updateEvery(&catalog.Model{}); got != weights.DefaultUpdateCheck {
		t.Errorf("default: got %v, want %v", got, weights.DefaultUpdateCheck)
	}
	m := &catalog.Model{Name: "x", Engine: "sim"}
	k := m.Key("e")
	m.UpdateCheck = -1
	if m.Key("e") != k {
		t.Error("update_check changed the model's key: its replicas would be replaced")
	}
}
