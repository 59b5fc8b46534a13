package llmctl

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// TestOutputFormats prints a listing as a table, as JSON (-o json and
// --json) and as YAML with the JSON's field names.
func TestOutputFormats(t *testing.T) {
	models := []map[string]any{{"name": "chat", "state": "ready", "min": 1, "max": 2, "replicas": []any{}}}
	a := newAdmin(t, map[string]answer{"GET /llm/models": {body: models}, "GET /llm/keys": {body: []map[string]any{{"id": "k1", "project": "a/b/c", "source": "config"}}}})
	for _, args := range [][]string{{"-o", "yaml", "models"}, {"--output=yaml", "keys"}} {
		out, _, err := run(t, a, args...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var got any
		if err := yaml.Unmarshal([]byte(out), &got); err != nil || strings.HasPrefix(out, "[") {
			t.Fatalf("%v printed no YAML: %v\n%s", args, err, out)
		}
		if !strings.Contains(out, "name: chat") && !strings.Contains(out, "id: k1") {
			t.Errorf("%v: the YAML lacks the JSON's field names:\n%s", args, out)
		}
	}
	j1, _, _ := run(t, a, "-o", "json", "models")
	j2, _, _ := run(t, a, "--json", "models")
	if j1 != j2 || !json.Valid([]byte(j1)) {
		t.Errorf("-o json printed %q, --json %q", j1, j2)
	}
	_, _, err := run(t, a, "-o", "xml", "models")
	if err == nil || err.Error() != `--output "xml" is not a format; use table, json or yaml` {
		t.Errorf("-o xml: got %v", err)
	}
	_, _, err = run(t, a, "--json", "-o", "yaml", "models")
	if err == nil || !strings.Contains(err.Error(), "--json and --output yaml disagree") {
		t.Errorf("--json -o yaml: got %v", err)
	}
}

// TestEveryListingPrintsYAML walks every ctl command and runs each that
// only reads (sends GETs alone) with -o yaml against an endpoint that
// answers every GET: what it prints must be the answer, as YAML.
func TestEveryListingPrintsYAML(t *testing.T) {
	c := &ctl{out: io.Discard, errOut: io.Discard}
	root := &cobra.Command{Use: "ctl"}
	c.register(root)
	listings := 0
	walk(root, func(cmd *cobra.Command) {
		path := strings.Fields(cmd.CommandPath())[1:]
		for _, body := range []string{`[{"name":"x","id":"x"}]`, `{"name":"x","id":"x","adapters":[{"name":"a","source":"/a"}]}`} {
			out, gets, ok := runListing(t, path, body)
			if !ok {
				continue
			}
			var got, want any
			_ = json.Unmarshal([]byte(body), &want)
			if err := yaml.Unmarshal([]byte(out), &got); err != nil || len(gets) == 0 || strings.HasPrefix(out, "{") || strings.HasPrefix(out, "[{") {
				t.Errorf("ctl %s -o yaml: printed no YAML (%v):\n%s", strings.Join(path, " "), err, out)
			} else if diff := cmp.Diff(want, got); diff != "" && len(gets) == 1 && !partOf(got, want) {
				t.Errorf("ctl %s -o yaml: not the answer (-want +got):\n%s", strings.Join(path, " "), diff)
			}
			listings++
			return
		}
	})
	t.Logf("ran %d listings with -o yaml", listings)
	if listings < 15 {
		t.Errorf("ran %d listings with -o yaml, want every one (at least 15)", listings)
	}
}

// runListing runs "ctl path… [x…] -o yaml" against an endpoint that
// answers every GET with body and refuses anything else; ok is false
// for a command that changes something or does not take the answer.
func runListing(t *testing.T, path []string, body string) (out string, gets []string, ok bool) {
	var mu sync.Mutex
	changed, paths := false, 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodGet {
			changed = true
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		gets = append(gets, r.URL.RequestURI())
		paths = len(gets)
		_, _ = io.WriteString(w, body)
	}))
	defer srv.Close()
	for n := range 3 {
		args := append(append([]string{"--admin", srv.URL, "-o", "yaml"}, path...), strings.Fields(strings.Repeat("x ", n))...)
		var buf bytes.Buffer
		done := make(chan error, 1)
		go func() {
			c := &ctl{out: &buf, errOut: io.Discard}
			root := &cobra.Command{Use: "ctl", SilenceUsage: true, SilenceErrors: true}
			c.register(root)
			root.SetArgs(args)
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			done <- root.Execute()
		}()
		select {
		case err := <-done:
			mu.Lock()
			wrote := changed
			mu.Unlock()
			if err == nil && !wrote {
				mu.Lock()
				defer mu.Unlock()
				return buf.String(), gets[:paths], true
			}
			if wrote || !strings.Contains(err.Error(), "arg") {
				return "", nil, false
			}
		case <-time.After(3 * time.Second):
			return "", nil, false // it follows or waits: not a listing
		}
	}
	return "", nil, false
}

// walk calls f on every runnable command under cmd.
func walk(cmd *cobra.Command, f func(*cobra.Command)) {
	for _, sub := range cmd.Commands() {
		if sub.Runnable() && sub.Name() != "help" && sub.Name() != "completion" {
			f(sub)
		}
		walk(sub, f)
	}
}

// partOf says whether got is one member of the answer want (a command
// that lists one part of what it reads, as adapter list does).
func partOf(got, want any) bool {
	m, ok := want.(map[string]any)
	for _, v := range m {
		if ok && cmp.Equal(v, got) {
			return true
		}
	}
	return false
}
