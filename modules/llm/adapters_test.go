package llm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

func TestAdapterCaddyfileErrors(t *testing.T) {
	model := func(body string) string { return "llm {\n model a {\n  engine ollama\n" + body + " }\n}" }
	for _, tc := range []struct{ name, input, want string }{
		{"no name", model("  adapter {\n   source x\n  }\n"), "wrong argument count"},
		{"two names", model("  adapter b c {\n   source x\n  }\n"), "wrong argument count"},
		{"bad name", model("  adapter a/../b {\n   source x\n  }\n"), `model "a": adapter name "a/../b" has a ".." part`},
		{"no source", model("  adapter b {\n   scale 1\n  }\n"), `model "a": adapter "b": source is required`},
		{"source twice", model("  adapter b {\n   source x\n   source y\n  }\n"), `duplicate subdirective "source"`},
		{"bad scale", model("  adapter b {\n   source x\n   scale loud\n  }\n"), `adapter "b": scale "loud" is not a number above 0`},
		{"zero scale", model("  adapter b {\n   source x\n   scale 0\n  }\n"), "is not a number above 0"},
		{"unknown", model("  adapter b {\n   source x\n   rank 8\n  }\n"), `unrecognized adapter subdirective "rank"; use source or scale`},
		{"twice", model("  adapter b {\n   source x\n  }\n  adapter b {\n   source y\n  }\n"), `model "a": adapter "b" is declared twice`},
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

func TestAdapterNames(t *testing.T) {
	ad := func(name string) []*catalog.Adapter { return []*catalog.Adapter{{Name: name, Source: "/a.gguf"}} }
	for _, tc := range []struct {
		name   string
		models []*catalog.Model
		want   string
	}{
		{"model name", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: ad("b")}, {Name: "b", Engine: "sim"}},
			`model "a": adapter name "b" is already the name of model "b"; give the adapter a name of its own`},
		{"own name", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: ad("a")}}, `adapter name "a" is already the name of model "a"`},
		{"alias", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: ad("b")}, {Name: "c", Engine: "sim", Aliases: []string{"b"}}},
			`adapter name "b" is already the name of model "c"`},
		{"another adapter", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: ad("x")}, {Name: "c", Engine: "ollama", Adapters: ad("x")}},
			`model "c": adapter name "x" is already an adapter of model "a"`},
		{"no source", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: []*catalog.Adapter{{Name: "x"}}}}, `adapter "x": source is required`},
		{"negative scale", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: []*catalog.Adapter{{Name: "x", Source: "/x", Scale: -1}}}}, "must not be negative"},
		{"ok", []*catalog.Model{{Name: "a", Engine: "ollama", Adapters: ad("a-sql")}, {Name: "c", Engine: "ollama", Adapters: ad("c-sql")}}, ""},
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

func TestAdapterEntries(t *testing.T) {
	base := &catalog.Model{Name: "tiny", Engine: "ollama", Aliases: []string{"small"}, Fallbacks: []string{"other"}, Owner: "acme",
		Adapters: []*catalog.Adapter{{Name: "tiny-sql", Source: "/a.gguf"}}}
	c, err := catalog.NewCatalog([]*catalog.Model{base, {Name: "other", Engine: "sim"}})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Adapters["tiny-sql"]
	if e == nil || e.Name != "tiny-sql" || e.AdapterOf() != "tiny" || e.Owner != "acme" || e.Aliases != nil || e.Fallbacks != nil || e.Adapters != nil {
		t.Fatalf("adapter entry %+v", e)
	}
	if base.AdapterOf() != "" {
		t.Error("the model says it is an adapter")
	}
	if got := c.Closest("tiny-sq", 3); len(got) == 0 || got[0] != "tiny-sql" {
		t.Errorf("closest to tiny-sq: %q", got)
	}
	// The adapter changes the shape of the model's replicas.
	plain := *base
	plain.Adapters = nil
	if base.Key("e") == plain.Key("e") {
		t.Error("adding an adapter keeps the model's replicas")
	}
}

func TestAdapterSelector(t *testing.T) {
	with := fleet.NewStandaloneReplica("r1", "tiny")
	with.Adapters = map[string]string{"tiny-sql": `{"model":"tiny-sql"}`}
	without := fleet.NewStandaloneReplica("r2", "tiny")
	sel := fleet.NewAdapterSelector(fleet.LeastOutstanding{}, "tiny-sql")
	if got := sel.Select([]*fleet.Replica{without, with}); got != with {
		t.Errorf("picked %v, want the replica that loaded the adapter", got)
	}
	if got := sel.Select([]*fleet.Replica{without}); got != nil {
		t.Errorf("picked %v from replicas without the adapter", got.ID)
	}
	if m := with.AdapterMembers("tiny-sql"); string(m) != `{"model":"tiny-sql"}` {
		t.Errorf("members %s", m)
	}
	if m := with.AdapterMembers("tiny"); m != nil {
		t.Errorf("members of the model itself: %s", m)
	}
	body, err := fleet.SetMembers([]byte(`{"model":"tiny-sql","messages":[],"temperature":0}`), []byte(`{"lora":[{"id":0,"scale":1}]}`))
	if err != nil || string(body) != `{"lora":[{"id":0,"scale":1}],"messages":[],"model":"tiny-sql","temperature":0}` {
		t.Errorf("SetMembers: %s %v", body, err)
	}
}

func TestAdapterSourcesCountAsUsed(t *testing.T) {
	models := []*catalog.Model{{Name: "tiny", Source: "/m.gguf", Adapters: []*catalog.Adapter{{Name: "tiny-sql", Source: "mirror://sql/v1"}}}, {Name: "b"}}
	got := weights.WithAdapterSources(models)
	if len(got) != 3 || got[2].Name != "tiny-sql" || got[2].Source != "mirror://sql/v1" || len(models) != 2 {
		t.Fatalf("got %d entries (%+v); the catalog has %d", len(got), got, len(models))
	}
	if mm, mv, ok := weights.MirrorRef(got[2]); !ok || mm != "sql" || mv != "v1" {
		t.Errorf("the adapter's mirror version: %s/%s %v", mm, mv, ok)
	}
}

func TestAdapterSourcesChecked(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "a.gguf")
	if err := os.WriteFile(gguf, []byte("GGUF\x03\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &catalog.Model{Name: "tiny", Engine: "ollama"}
	a := new(App)
	ok := []*catalog.Adapter{{Name: "tiny-a", Source: gguf}}
	if err := a.checkAdapterSources(context.Background(), m, ok, []string{catalog.FormatGGUF}); err != nil {
		t.Errorf("a GGUF adapter: %v", err)
	}
	missing := []*catalog.Adapter{{Name: "tiny-b", Source: filepath.Join(dir, "missing.gguf")}}
	err := a.checkAdapterSources(context.Background(), m, missing, []string{catalog.FormatGGUF})
	var se *weights.SourceError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), `model "tiny": adapter "tiny-b": `) {
		t.Errorf("a missing adapter file: %v", err)
	}
	off := false
	m.CheckSource = &off
	if err := a.checkAdapterSources(context.Background(), m, missing, []string{catalog.FormatGGUF}); err != nil {
		t.Errorf("with check_source off: %v", err)
	}
}
