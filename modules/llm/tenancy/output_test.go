package tenancy

import (
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// TestCapOf: the smallest of the model's max_output and the key's levels'
// applies, and is named by who sets it.
func TestCapOf(t *testing.T) {
	hash := HashKey("s")
	orgs := func(key, project, org int64) []*Org {
		lim := func(n int64) *Limits {
			if n == 0 {
				return nil
			}
			return &Limits{MaxOutput: n}
		}
		return []*Org{{Name: "acme", Limits: lim(org), Teams: []*Team{{Name: "r", Projects: []*Project{{Name: "p", Limits: lim(project),
			Keys: []*APIKey{{ID: "k1", SHA256: hash, Limits: lim(key)}}}}}}}}
	}
	for _, tc := range []struct {
		name              string
		model             int64
		key, project, org int64
		noTenant          bool
		want              int64
		setter            string
	}{
		{name: "none", want: 0, setter: `model "m"`},
		{name: "model only", model: 4096, want: 4096, setter: `model "m"`},
		{name: "no tenant", model: 4096, key: 100, noTenant: true, want: 4096, setter: `model "m"`},
		{name: "key below model", model: 4096, key: 1000, want: 1000, setter: "your key k1"},
		{name: "key above model", model: 4096, key: 8000, want: 4096, setter: `model "m"`},
		{name: "tie is the model's", model: 1000, key: 1000, want: 1000, setter: `model "m"`},
		{name: "project tightest", model: 4096, key: 3000, project: 2000, org: 2500, want: 2000, setter: "your project acme/r/p"},
		{name: "organisation without model", org: 512, want: 512, setter: "your organisation acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kr, err := NewKeyring(orgs(tc.key, tc.project, tc.org))
			if err != nil {
				t.Fatal(err)
			}
			tn, _ := kr.Lookup("s")
			if tc.noTenant {
				tn = nil
			}
			c := CapOf(&catalog.Model{Name: "m", MaxOutput: tc.model}, tn)
			if c.Tokens != tc.want || c.Setter("m") != tc.setter {
				t.Errorf("got %d set for %s, want %d set for %s", c.Tokens, c.Setter("m"), tc.want, tc.setter)
			}
		})
	}
}

func TestMaxOutputValidate(t *testing.T) {
	if err := (&Limits{MaxOutput: -1}).Validate(); err == nil {
		t.Error("a negative max_output was accepted")
	}
}

func BenchmarkCapOfNoLimit(b *testing.B) {
	kr, _ := NewKeyring([]*Org{{Name: "a", Teams: []*Team{{Name: "t", Projects: []*Project{{Name: "p",
		Keys: []*APIKey{{ID: "k", SHA256: HashKey("s")}}}}}}}})
	tn, _ := kr.Lookup("s")
	m := &catalog.Model{Name: "m"}
	b.ReportAllocs()
	for b.Loop() {
		if CapOf(m, tn).Tokens != 0 {
			b.Fatal("a cap from nowhere")
		}
	}
}
