package llmquota

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"argument", "llm_quota foo", "wrong argument count"},
		{"unknown", "llm_quota {\n colour red\n}", `unrecognized llm_quota subdirective "colour"`},
		{"duplicate", "llm_quota {\n store memory\n store memory\n}", `duplicate subdirective "store"`},
		{"no value", "llm_quota {\n store\n}", "wrong argument count"},
		{"two values", "llm_quota {\n store a b\n}", "wrong argument count"},
		{"bad policy", "llm_quota {\n on_store_error maybe\n}", `on_store_error "maybe"`},
		{"bad max tokens", "llm_quota {\n default_max_tokens 0\n}", "at least 1"},
		{"bad lease", "llm_quota {\n lease forever\n}", `lease "forever"`},
		{"bad headers", "llm_quota {\n rate_limit_headers never\n}", `rate_limit_headers "never": use always (every answer) or refused (429s only)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Quota).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
