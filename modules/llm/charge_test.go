package llm

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

type charged struct {
	key    string
	levels []string
	model  *catalog.Model
	tokens int64
}

type recordingCharger struct{ got []charged }

func (r *recordingCharger) Charge(_ context.Context, t *tenancy.Tenant, m *catalog.Model, n int64) error {
	var levels []string
	for _, l := range t.Levels {
		levels = append(levels, l.Node())
	}
	r.got = append(r.got, charged{t.KeyID, levels, m, n})
	return nil
}

func (r *recordingCharger) Room(context.Context, *tenancy.Tenant) error { return nil }

// A charge counts at the key's levels; a revoked key's, or a deleted
// key's whose project the caller names, at its project's; else it is
// dropped and the debug log says so.
func TestChargeResolvesTheKey(t *testing.T) {
	hash := func(s string) string { return tenancy.HashKey(s) }
	orgs := []*tenancy.Org{{Name: "acme", Teams: []*tenancy.Team{{Name: "research", Projects: []*tenancy.Project{
		{Name: "alpha", Keys: []*tenancy.APIKey{{ID: "ka", SHA256: hash("a")}}}}}}}}
	kr, err := tenancy.NewKeyring(orgs)
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if err := kr.Add(&tenancy.APIKey{ID: "kr", SHA256: hash("r"), Project: "acme/research/alpha", Revoked: &revoked}, "acme/research/alpha"); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.NewCatalog([]*catalog.Model{{Name: "embed", Engine: "sim", Price: &catalog.Price{InputPerMillion: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.DebugLevel)
	a := &App{view: new(atomic.Pointer[view]), keys: new(atomic.Pointer[tenancy.Keyring]), shared: &procShared{}, logger: zap.New(core)}
	a.view.Store(&view{cat: cat})
	a.keys.Store(kr)
	if err := a.Charge(t.Context(), tenancy.Charge{Key: "ka", Model: "embed", PromptTokens: 5}); err != nil {
		t.Fatal(err) // no charger: nothing happens
	}
	rc := &recordingCharger{}
	unregister := a.RegisterCharger("test", rc)
	project := []string{"p:acme/research/alpha", "t:acme/research", "o:acme"}
	for _, tc := range []struct {
		name   string
		charge tenancy.Charge
		want   []string // levels charged, nil for none
	}{
		{"active key", tenancy.Charge{Key: "ka", Model: "embed", PromptTokens: 7}, append([]string{"k:ka"}, project...)},
		{"revoked key", tenancy.Charge{Key: "kr", Model: "embed", PromptTokens: 7}, project},
		{"deleted key, project known", tenancy.Charge{Key: "kd", Project: "acme/research/alpha", Model: "embed", PromptTokens: 7}, project},
		{"deleted key, project unknown", tenancy.Charge{Key: "kd", Model: "embed", PromptTokens: 7}, nil},
		{"deleted key, project deleted", tenancy.Charge{Key: "kd", Project: "acme/research/gone", Model: "embed", PromptTokens: 7}, nil},
		{"no key", tenancy.Charge{Project: "acme/research/alpha", Model: "embed", PromptTokens: 7}, nil},
		{"no tokens", tenancy.Charge{Key: "ka", Model: "embed"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc.got = nil
			if err := a.Charge(t.Context(), tc.charge); err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if len(rc.got) != 0 {
					t.Fatalf("charged %+v, want nothing", rc.got)
				}
				return
			}
			if len(rc.got) != 1 || rc.got[0].key != tc.charge.Key || rc.got[0].tokens != 7 || rc.got[0].model.Price == nil {
				t.Fatalf("got %+v, want 7 tokens of the priced model for key %s", rc.got, tc.charge.Key)
			}
			if got := rc.got[0].levels; len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != "o:acme" {
				t.Errorf("levels charged: got %v, want %v", got, tc.want)
			}
		})
	}
	if n := logs.FilterMessage("dropping a charge: its key and its project are gone").Len(); n != 2 {
		t.Errorf("%d debug lines for the dropped charges, want 2", n)
	}
	unregister()
	rc.got = nil
	_ = a.Charge(t.Context(), tenancy.Charge{Key: "ka", Model: "embed", PromptTokens: 7})
	if len(rc.got) != 0 {
		t.Errorf("an unregistered charger was charged")
	}
}
