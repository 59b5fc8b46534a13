package llmctl

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestDoesNotImportTheLLMApp keeps the command line apart from the
// gateway: it speaks to it through HTTP and the JSON shapes of its
// subpackages (llmapi, catalog, tenancy, weights), never through the llm
// app package, directly or through another package.
func TestDoesNotImportTheLLMApp(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	const app = "github.com/llmgw/llmgw/modules/llm"
	for _, dep := range strings.Fields(string(out)) {
		if dep == app {
			t.Errorf("llmctl imports %s (the llm app); use the types of its subpackages (llmapi, catalog, tenancy, weights) instead", app)
		}
	}
}
