package layers

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const mod = "github.com/llmgw/llmgw"

// pkg is one package of the module as go list gives it.
type pkg struct {
	path    string // without the module path: /modules/llm/place
	dir     string
	imports []string // the module's own packages it imports, likewise
	files   []string // non-test Go files
}

func listPackages(t *testing.T) map[string]*pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .Imports \" \"}}|{{join .GoFiles \" \"}}", mod+"/...")
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]*pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 4 {
			continue
		}
		p := &pkg{path: strings.TrimPrefix(f[0], mod), dir: f[1], files: strings.Fields(f[3])}
		for _, imp := range strings.Fields(f[2]) {
			if rest, ok := strings.CutPrefix(imp, mod); ok {
				p.imports = append(p.imports, rest)
			}
		}
		pkgs[p.path] = p
	}
	return pkgs
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for dir != "/" {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("no go.mod above the test")
	return ""
}

// allowed lists, for the packages below the llm app, the module's
// packages each may import (their subpackages included). The arrows of
// the app's layers point one way: llm → cluster → fleet → place →
// {tenancy, catalog}; weights → catalog; nothing below imports the app.
var allowed = map[string][]string{
	"/modules/llm/catalog":     {"/modules/internal", "/plugins/engine"},
	"/modules/llm/tenancy":     {"/modules/llm/catalog", "/modules/internal"},
	"/modules/llm/llmapi":      {"/modules/llm/catalog", "/modules/llm/tenancy", "/modules/llm/licences", "/modules/internal", "/mirror", "/plugins/engine"},
	"/modules/llm/licences":    {},
	"/modules/llm/place":       {"/modules/llm/catalog", "/modules/llm/tenancy", "/modules/llm/llmapi", "/plugins/engine"},
	"/modules/llm/weights":     {"/modules/llm/catalog", "/modules/llm/llmapi", "/modules/internal", "/mirror"},
	"/modules/llm/fleet":       {"/modules/llm/catalog", "/modules/llm/llmapi", "/modules/llm/place", "/modules/llm/weights", "/mirror", "/plugins"},
	"/modules/llm/cluster":     {"/release", "/modules/llm/catalog", "/modules/llm/tenancy", "/modules/llm/llmapi", "/modules/llm/place", "/modules/llm/fleet", "/modules/llm/weights", "/modules/llm/audit", "/modules/llm/guardhist", "/modules/llm/reqlog", "/modules/llm/traffic", "/modules/internal", "/modules/openai", "/mirror", "/plugins"},
	"/modules/llm/audit":       {"/modules/llm/catalog", "/modules/llm/llmapi", "/modules/internal"},
	"/modules/llm/guardhist":   {"/modules/llm/catalog", "/modules/llm/llmapi", "/modules/llm/minutes", "/modules/internal"},
	"/modules/llm/minutes":     {},
	"/modules/llm/traffic":     {"/modules/llm/guardhist", "/modules/llm/minutes", "/modules/llm/catalog", "/modules/llm/llmapi", "/modules/internal"},
	"/modules/llm/routeorder":  {},
	"/modules/llm/secrets":     {"/modules/internal"},
	"/modules/llm/overview":    {"/modules/llm/llmapi"},
	"/modules/llm/appmetrics":  {"/modules/llm/fleet", "/modules/llm/llmapi"},
	"/modules/llm/presets":     {"/modules/llm/catalog", "/modules/llm/llmapi", "/modules/internal"},
	"/modules/llm/reqlog":      {"/modules/llm/llmapi", "/modules/internal", "/modules/openai"},
	"/modules/llm/enginelist":  {"/modules/llm/llmapi", "/plugins"},
	"/modules/llm/apidoc":      {"/modules/llm/llmapi", "/modules/llm/catalog", "/modules/llm/tenancy", "/mirror", "/plugins/engine"},
	"/modules/llm/modelcall":   {"/modules/llm/catalog", "/modules/llm/fleet", "/modules/openai"},
	"/modules/llm/llmproc":     {"/modules/llm/llmapi", "/modules/internal"},
	"/modules/llm/federation":  {"/modules/llm/catalog", "/modules/llm/tenancy", "/modules/llm/llmapi", "/modules/internal", "/modules/openai"},
	"/modules/llm/nodeupgrade": {"/modules/llm/llmapi", "/modules/llm/llmproc", "/modules/internal", "/release"},
	// The command-line client speaks the admin API's JSON: never the app.
	"/modules/llmctl/setup": {"/modules/llm/place", "/modules/llm/catalog", "/modules/llm/tenancy", "/modules/internal"},
	"/modules/llmctl":       {"/release", "/modules/llm/llmapi", "/modules/llm/catalog", "/modules/llm/place", "/modules/llm/tenancy", "/modules/llm/weights", "/modules/internal", "/mirror"},
	// Below every module.
	"/mirror":           {"/mirror"},
	"/plugins":          {"/plugins"},
	"/modules/openai":   {"/modules/internal"},
	"/modules/internal": {"/modules/internal"},
	"/modules/mcpwire":  {"/modules/internal", "/modules/openai"},
	"/engines":          {"/engines", "/plugins"},

	// The knowledge bases' parts: the document reader, the store, the
	// chunking and search index; the handler (modules/llmkb) above them.
	"/modules/llmkb/docread": {"/modules/llmkb/docread"},
	"/modules/llmkb/kbstore": {"/modules/llmkb/kbstore"},
	"/modules/llmkb/kbindex": {"/modules/llmkb/docread", "/modules/llmkb/kbstore"},
	// The jobs' ComfyUI client, below the handler (modules/llmjobs).
	"/modules/llmjobs/comfy": {},
}

// rule finds the allow list that governs p: its own, else the nearest
// parent's that lists one.
func rule(p string) ([]string, string, bool) {
	for q := p; q != "" && q != "/"; q = filepath.Dir(q) {
		if a, ok := allowed[q]; ok {
			return a, q, true
		}
	}
	return nil, "", false
}

func under(p, root string) bool { return p == root || strings.HasPrefix(p, root+"/") }

// TestArrowsPointOneWay fails when a package imports one of the module's
// packages its layer may not: a lower layer of the llm app importing a
// higher one or the app, the CLI importing the app, the mirror or the
// plugin protocol importing a module.
func TestArrowsPointOneWay(t *testing.T) {
	for _, p := range listPackages(t) {
		allow, owner, ok := rule(p.path)
		if !ok {
			continue
		}
		for _, imp := range p.imports {
			if under(imp, owner) && owner != "/modules/llm" && !(owner == "/modules/openai" && p.path == owner && imp != owner) {
				continue // inside its own family (the wire types never import a translation)
			}
			fine := false
			for _, a := range allow {
				if under(imp, a) {
					fine = true
				}
			}
			if !fine {
				t.Errorf("%s imports %s: its layer (%s) may import only %v", p.path, imp, owner, allow)
			}
		}
	}
}

// TestHandlersImportNoOtherHandler keeps the request handlers apart: each
// imports the llm app and openai, never another handler family.
func TestHandlersImportNoOtherHandler(t *testing.T) {
	handlers := []string{"/modules/llmrouter", "/modules/llmguard", "/modules/llmquota", "/modules/llmcache", "/modules/llmkb", "/modules/llmjobs", "/modules/llmmcp", "/modules/llmadmin", "/modules/llmconsole"}
	for _, p := range listPackages(t) {
		for _, h := range handlers {
			if !under(p.path, h) {
				continue
			}
			for _, imp := range p.imports {
				for _, other := range handlers {
					if other != h && under(imp, other) {
						t.Errorf("%s imports the handler %s", p.path, imp)
					}
				}
			}
		}
	}
}

// maxLines bounds a package's production code.
const maxLines = 6000

// TestPackageSize fails when a package's non-test Go files hold more
// than maxLines lines.
func TestPackageSize(t *testing.T) {
	for _, p := range listPackages(t) {
		n := 0
		for _, f := range p.files {
			b, err := os.ReadFile(filepath.Join(p.dir, f))
			if err != nil {
				t.Fatal(err)
			}
			n += bytes.Count(b, []byte("\n"))
		}
		if n > maxLines {
			t.Errorf("%s has %d lines of production code, over %d: split it", p.path, n, maxLines)
		}
	}
}
