package llm

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func TestMergeTenancy(t *testing.T) {
	config := []*tenancy.Org{{Name: "acme", Limits: &tenancy.Limits{RequestsPerMinute: 10},
		Teams: []*tenancy.Team{{Name: "research", Projects: []*tenancy.Project{{Name: "alpha"}}}}}}
	entries := []*tenancy.Entry{
		{Path: "acme/research/beta", Limits: &tenancy.Limits{RequestsPerMinute: 5}}, // before its parent is known: sorted
		{Path: "acme", Limits: &tenancy.Limits{RequestsPerMinute: 20}, Overlay: true},
		{Path: "new"},
		{Path: "new/t", Capacity: &tenancy.Capacity{Replicas: 1}},
		{Path: "gone/t"},
		{Path: "old", Overlay: true},
		{Path: "acme/research", Limits: &tenancy.Limits{RequestsPerMinute: 1}}, // created at runtime, then declared in the file
	}
	tn, dropped := tenancy.Merge(config, entries)
	if got := strings.Join(tn.Paths(), " "); got != "acme acme/research acme/research/alpha acme/research/beta new new/t" {
		t.Fatalf("paths: got %s", got)
	}
	if l, _, _ := tn.Find("acme"); l.RequestsPerMinute != 20 {
		t.Fatalf("overlay: got %+v, want 20 a minute", l)
	}
	if config[0].Limits.RequestsPerMinute != 10 {
		t.Fatal("the merge wrote the config's tree")
	}
	if _, c, _ := tn.Find("new/t"); c.Replicas != 1 {
		t.Fatalf("capacity: got %+v", c)
	}
	if len(dropped) != 3 || dropped["gone/t"] == "" || dropped["old"] == "" || dropped["acme/research"] == "" {
		t.Fatalf("dropped: got %v, want gone/t, old and acme/research", dropped)
	}
	if l, _, _ := tn.Find("acme/research"); l != nil {
		t.Fatalf("a level the file declares now keeps the file's limits: got %+v", l)
	}
	if _, err := tenancy.NewKeyring(tn.Orgs()); err != nil {
		t.Fatal(err)
	}
}

func TestParseTenantRoute(t *testing.T) {
	cases := []struct {
		path string
		want tenancy.Route
		ok   bool
	}{
		{"/llm/tenants", tenancy.Route{}, true},
		{"/llm/tenants/orgs", tenancy.Route{Kind: "org"}, true},
		{"/llm/tenants/orgs/acme", tenancy.Route{Kind: "org", Path: "acme"}, true},
		{"/llm/tenants/orgs/acme/teams", tenancy.Route{Kind: "team", Parent: "acme"}, true},
		{"/llm/tenants/orgs/acme/teams/r/projects/p", tenancy.Route{Kind: "project", Parent: "acme/r", Path: "acme/r/p"}, true},
		{"/llm/tenants/teams", tenancy.Route{}, false},
		{"/llm/tenants/orgs/acme/projects", tenancy.Route{}, false},
		{"/llm/tenants/orgs/acme/teams/r/projects/p/keys", tenancy.Route{}, false},
	}
	for _, tc := range cases {
		got, ok := tenancy.ParseRoute(tc.path)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s: got %+v %v, want %+v %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseCapacity(t *testing.T) {
	a := new(App)
	d := caddyfile.NewTestDispenser(`org acme {
		capacity {
			memory 64GiB
			cores 32
			gpus 4
			replicas 10
		}
		team t {
			capacity {
				replicas 2
			}
		}
	}`)
	d.Next()
	if err := tenancy.ParseOrg(d, func(o *tenancy.Org) { a.Orgs = append(a.Orgs, o) }); err != nil {
		t.Fatal(err)
	}
	if got, want := *a.Orgs[0].Capacity, (tenancy.Capacity{Memory: 64 << 30, Cores: 32, GPUs: 4, Replicas: 10}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if a.Orgs[0].Teams[0].Capacity.Replicas != 2 {
		t.Fatalf("team: got %+v", a.Orgs[0].Teams[0].Capacity)
	}
	for _, bad := range []string{"org a {\n capacity {\n disks 1\n }\n}", "org a {\n capacity {\n replicas 0\n }\n}",
		"org a {\n capacity {\n}\n capacity {\n}\n}", "org a {\n capacity {\n memory lots\n }\n}"} {
		d := caddyfile.NewTestDispenser(bad)
		d.Next()
		if err := tenancy.ParseOrg(d, func(*tenancy.Org) {}); err == nil {
			t.Errorf("%q: got no error", bad)
		}
	}
}
