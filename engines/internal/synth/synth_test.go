package synth

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestObjectAndFragments(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"s":{"type":"string"},"n":{"type":["number","null"]},
		"list":{"type":"array","items":{"type":"object","properties":{"b":{"type":"boolean"}}}},"c":{"const":"x"},"e":{"enum":[1,2]},
		"any":{"anyOf":[{"type":"integer"},{"type":"string"}]}}}`)
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 0))
		text := Object(schema, rng)
		var v struct {
			S    string
			N    *float64
			List []struct{ B *bool }
			C    string
			E    int
			Any  *int
		}
		if err := json.Unmarshal([]byte(text), &v); err != nil || !strings.Contains(v.S, "東京") || v.N == nil || len(v.List) != 2 ||
			v.List[0].B == nil || v.C != "x" || (v.E != 1 && v.E != 2) || v.Any == nil {
			t.Fatalf("seed %d: %s does not fit the schema: %v", seed, text, err)
		}
		frags := Fragments(text, rng)
		if strings.Join(frags, "") != text {
			t.Fatalf("seed %d: fragments %q do not join to %q", seed, frags, text)
		}
		for _, f := range frags {
			if f == "" || !utf8.ValidString(f) {
				t.Fatalf("seed %d: fragment %q", seed, f)
			}
		}
	}
	if got := Object(json.RawMessage(`{"type":"string"}`), rand.New(rand.NewPCG(1, 1))); got != "{}" {
		t.Errorf("a schema that is not an object: got %s, want {}", got)
	}
}
