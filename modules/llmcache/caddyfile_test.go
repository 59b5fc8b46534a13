package llmcache

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"argument", "llm_cache foo", "wrong argument count"},
		{"unknown", "llm_cache {\n colour red\n}", `unrecognized llm_cache subdirective "colour"`},
		{"duplicate", "llm_cache {\n ttl 1m\n ttl 2m\n}", `duplicate subdirective "ttl"`},
		{"ttl missing", "llm_cache {\n ttl\n}", "wrong argument count"},
		{"ttl bad", "llm_cache {\n ttl soon\n}", `ttl "soon"`},
		{"memory bad", "llm_cache {\n max_memory lots\n}", `max_memory "lots"`},
		{"models missing", "llm_cache {\n models\n}", "wrong argument count"},
		{"temperature bad", "llm_cache {\n max_temperature hot\n}", `max_temperature "hot"`},
		{"scope bad", "llm_cache {\n scope planet\n}", `scope "planet"`},
		{"threshold bad", "llm_cache {\n semantic 2\n}", "semantic threshold"},
		{"threshold two", "llm_cache {\n semantic 0.8 0.9\n}", "wrong argument count"},
		{"redis two", "llm_cache {\n redis a b\n}", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Cache).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
