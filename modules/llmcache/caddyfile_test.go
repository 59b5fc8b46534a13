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
		{"embedder threshold bad", "llm_cache {\n semantic {\n embedder e 1.5\n }\n}", `embedder threshold "1.5"`},
		{"embedder three", "llm_cache {\n semantic {\n embedder e 0.8 0.9\n }\n}", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Cache).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestUnmarshalCaddyfileEmbedderThreshold(t *testing.T) {
	c := new(Cache)
	if err := c.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_cache {\n semantic 0.95 {\n embedder minilm 0.85\n }\n}")); err != nil {
		t.Fatal(err)
	}
	if s := c.Semantic; s.Embedder != "minilm" || s.EmbedderThreshold != 0.85 || s.Threshold != 0.95 {
		t.Errorf("got %+v, want embedder minilm at 0.85 and threshold 0.95", *s)
	}
}
