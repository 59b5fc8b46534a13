package llmproc

import (
	"slices"
	"testing"
)

func TestRestartArgs(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args, want []string
	}{
		{"run", []string{"llmgw", "run", "--config", "Caddyfile"}, []string{"llmgw", "run", "--config", "Caddyfile"}},
		{"started by llmgw start", []string{"llmgw", "run", "--pingback", "127.0.0.1:4000", "--config", "C"}, []string{"llmgw", "run", "--config", "C"}},
		{"pingback with =", []string{"llmgw", "run", "--pingback=127.0.0.1:4000", "--watch"}, []string{"llmgw", "run", "--watch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := restartArgs(tc.args); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
