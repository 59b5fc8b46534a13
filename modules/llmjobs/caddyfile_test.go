package llmjobs

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	var j Jobs
	d := caddyfile.NewTestDispenser(`llm_jobs {
		retention 1h
		max_queued 10
		max_workflow 1MiB
		max_input_size 2MiB
		max_inputs 3
	}`)
	if err := j.UnmarshalCaddyfile(d); err != nil {
		t.Fatal(err)
	}
	if j.MaxQueued != 10 || j.MaxWorkflow != 1<<20 || j.MaxInputSize != 2<<20 || j.MaxInputs != 3 {
		t.Errorf("got %+v", j)
	}
	for _, tc := range []struct{ name, in, want string }{
		{"unknown", "llm_jobs {\n\tmax_files 3\n}", "use retention, max_queued, max_workflow, max_input_size or max_inputs"},
		{"zero inputs", "llm_jobs {\n\tmax_inputs 0\n}", "a whole number of at least 1"},
		{"a bad size", "llm_jobs {\n\tmax_input_size lots\n}", "max_input_size"},
	} {
		var j Jobs
		err := j.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}
