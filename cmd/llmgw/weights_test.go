package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

type weightsView struct {
	Nodes []llmapi.NodeWeights `json:"nodes"`
}

func (g *gateway) weights(query string) weightsView {
	g.t.Helper()
	var v weightsView
	g.adminGet("/llm/weights"+query, &v)
	return v
}

func entryPaths(es []llmapi.WeightsEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Path)
	}
	slices.Sort(out)
	return out
}

// The weights directory (the mirror's node cache) lists what no catalog
// model uses: a version of a removed model, stray files, a fetch that was
// left half done; the versions of a running model and of a model kept
// with max 0 are used. ctl weights prune --dry-run removes nothing; prune
// removes exactly the left-overs, the models still serve, and the prune
// is in the audit log.
func TestWeightsLeftOver(t *testing.T) {
	store, cache := t.TempDir(), filepath.Join(t.TempDir(), "cache")
	g := startGateway(t, fmt.Sprintf(`
		model base {
			engine sim
		}
		mirror {
			store local dir %s
			cache %s
		}`, store, cache), "")
	src := t.TempDir()
	for _, v := range []string{"v1", "v2", "v3"} {
		p := filepath.Join(src, "tiny-"+v+".gguf")
		os.WriteFile(p, []byte("GGUF weights "+v), 0o644)
		if code, body := adminDo(t, g, "POST", "/llm/mirror/versions", fmt.Sprintf(`{"model":"tiny","version":%q,"source":%q}`, v, p)); code != 200 {
			t.Fatalf("mirror add %s: %d %s", v, code, body)
		}
	}
	for _, m := range []struct{ name, version string }{{"serving", "v1"}, {"kept", "v2"}, {"gone", "v3"}} {
		if code, body := adminDo(t, g, "POST", "/llm/models", fmt.Sprintf(`{"name":%q,"engine":"sim","source":"mirror://tiny/%s"}`, m.name, m.version)); code != 201 {
			t.Fatalf("add %s: %d %s", m.name, code, body)
		}
		g.readyReplicas(m.name, 1)
	}
	// kept stops running but stays in the catalog; gone is removed.
	if code, body := adminDo(t, g, "POST", "/llm/models/kept/scale", `{"max":0}`); code != 200 {
		t.Fatalf("scale kept to 0: %d %s", code, body)
	}
	if code, body := adminDo(t, g, "DELETE", "/llm/models/gone", ""); code != 204 {
		t.Fatalf("remove gone: %d %s", code, body)
	}
	waitFor(t, 15*time.Second, "the replicas of kept and gone to stop", func() bool {
		ms := g.models()
		_, there := ms["gone"]
		return len(ms["kept"].Replicas) == 0 && !there
	})
	os.WriteFile(filepath.Join(cache, "stray.bin"), make([]byte, 4096), 0o644)
	os.MkdirAll(filepath.Join(cache, "old", "v9"), 0o755)
	os.WriteFile(filepath.Join(cache, "old", "v9", "w.gguf.part"), make([]byte, 1000), 0o644)

	// tiny/v3 is used while gone's replica drains and holds it.
	wantUnused := []string{"old/v9", "stray.bin", "tiny/v3"}
	var v weightsView
	waitFor(t, 15*time.Second, "tiny/v3 to be left over", func() bool {
		v = g.weights("")
		return len(v.Nodes) == 1 && slices.Equal(entryPaths(v.Nodes[0].Unused), wantUnused)
	})
	n := v.Nodes[0]
	if got := entryPaths(n.Unused); !slices.Equal(got, wantUnused) || n.Dir != cache {
		t.Fatalf("unused: %v in %s; want %v in %s", got, n.Dir, wantUnused, cache)
	}
	if got := entryPaths(n.Used); !slices.Equal(got, []string{"tiny/v1", "tiny/v2"}) {
		t.Errorf("used: %v; want tiny/v1 and tiny/v2", got)
	}
	for _, e := range n.Used {
		if want := map[string]string{"tiny/v1": "serving", "tiny/v2": "kept"}[e.Path]; !slices.Equal(e.UsedBy, []string{want}) {
			t.Errorf("%s is used by %v, want %s", e.Path, e.UsedBy, want)
		}
	}
	var unusedBytes int64
	for _, e := range n.Unused {
		unusedBytes += e.Size
	}
	if unusedBytes != n.UnusedBytes || unusedBytes < 4096+1000 {
		t.Errorf("unused bytes %d, entries sum %d", n.UnusedBytes, unusedBytes)
	}
	out, err := ctlRun(t, g, "weights")
	if err != nil || !regexpLine(out, "stray.bin", "4.0 KiB", "unused") || !regexpLine(out, "tiny/v3", "unused") || strings.Contains(out, "tiny/v1") {
		t.Errorf("ctl weights: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "weights", "--all"); err != nil || !regexpLine(out, "tiny/v2", "used by kept") {
		t.Errorf("ctl weights --all: %v\n%s", err, out)
	}

	out, err = ctlRun(t, g, "weights", "prune", "--dry-run")
	if err != nil || !strings.Contains(out, "would remove 3 entries") {
		t.Errorf("ctl weights prune --dry-run: %v\n%s", err, out)
	}
	if got := entryPaths(g.weights("").Nodes[0].Unused); !slices.Equal(got, wantUnused) {
		t.Fatalf("a dry run removed something: %v left", got)
	}
	out, err = ctlRun(t, g, "weights", "prune")
	if err != nil || !strings.Contains(out, "removed 3 entries") {
		t.Fatalf("ctl weights prune: %v\n%s", err, out)
	}
	for _, p := range []string{"stray.bin", "old", "tiny/v3"} {
		if _, err := os.Stat(filepath.Join(cache, p)); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", p, err)
		}
	}
	for _, p := range []string{"tiny/v1/tiny-v1.gguf", "tiny/v2/tiny-v2.gguf"} {
		if _, err := os.Stat(filepath.Join(cache, p)); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
	after := g.weights("").Nodes[0]
	if len(after.Unused) != 0 || after.UnusedBytes != 0 {
		t.Errorf("after the prune: %+v", after.Unused)
	}
	chatOnce(t, g, "serving")
	if code, body := adminDo(t, g, "POST", "/llm/models/kept/scale", `{"max":1}`); code != 200 {
		t.Fatalf("scale kept up: %d %s", code, body)
	}
	chatOnce(t, g, "kept")
	p := g.audit("action=weights")
	if len(p.Entries) != 1 || p.Entries[0].Actor == "" {
		t.Fatalf("audit of the prune: %+v", p.Entries)
	}
	if b, _ := json.Marshal(p.Entries[0].Fields); !strings.Contains(string(b), "stray.bin") {
		t.Errorf("the prune's audit entry: %s", b)
	}
}

// In a cluster GET /llm/weights on one node lists every node's weights
// directory, and a prune through one node with --node reaches another.
func TestClusterWeights(t *testing.T) {
	store := t.TempDir()
	c := startCluster(t, 2, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1"))+fmt.Sprintf(`
		mirror {
			store shared dir %s
		}`, store))
	n1, n2 := c.nodes["n1"], c.nodes["n2"]
	var dir2 string
	waitFor(t, 10*time.Second, "both nodes in GET /llm/weights", func() bool {
		v := n1.weights("")
		if len(v.Nodes) != 2 || v.Nodes[1].Node != "n2" || v.Nodes[1].Error != "" {
			return false
		}
		dir2 = v.Nodes[1].Dir
		return dir2 != "" && dir2 != v.Nodes[0].Dir
	})
	os.WriteFile(filepath.Join(dir2, "stray-on-n2.bin"), make([]byte, 2048), 0o644)
	v := n1.weights("?node=n2")
	if len(v.Nodes) != 1 || !slices.Equal(entryPaths(v.Nodes[0].Unused), []string{"stray-on-n2.bin"}) {
		t.Fatalf("n2's weights through n1: %+v", v)
	}
	out, err := ctlRun(t, n1, "weights", "prune", "--node", "n2")
	if err != nil || !strings.Contains(out, "n2: removed stray-on-n2.bin") {
		t.Fatalf("ctl weights prune --node n2 through n1: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir2, "stray-on-n2.bin")); !os.IsNotExist(err) {
		t.Errorf("the stray file is still on n2: %v", err)
	}
	if out, err := ctlRun(t, n2, "weights", "--node", "n9"); err == nil || !strings.Contains(out, `no live node "n9"`) {
		t.Errorf("ctl weights --node n9: %v\n%s", err, out)
	}
}
