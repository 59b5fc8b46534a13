package llmmcp

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"argument", `llm_mcp foo`, "wrong argument count"},
		{"unknown subdirective", "llm_mcp {\n upstream a\n}", `unrecognized llm_mcp subdirective "upstream"`},
		{"duplicate", "llm_mcp {\n sse_path /a\n sse_path /b\n}", `duplicate subdirective "sse_path"`},
		{"server without name", "llm_mcp {\n server\n}", "wrong argument count"},
		{"server twice", "llm_mcp {\n server a {\n url http://x\n }\n server a {\n url http://y\n }\n}", `mcp server "a" declared twice`},
		{"bad name", "llm_mcp {\n server a.b {\n url http://x\n }\n}", `use 1 to 64 letters, digits`},
		{"long name", "llm_mcp {\n server " + strings.Repeat("a", 65) + " {\n url http://x\n }\n}", `use 1 to 64 letters`},
		{"url with a space", "llm_mcp {\n server a {\n url \"http://a b/mcp\"\n }\n}", `url "http://a b/mcp" is not a URL`},
		{"url without host", "llm_mcp {\n server a {\n url http:///mcp\n }\n}", `names no host`},
		{"tenant name with a control character", "llm_mcp {\n server a {\n url http://x\n tenant key \"k\x1b1\" {\n header A b\n }\n }\n}", `tenant key "k\x1b1" has a space`},
		{"redirect_url with a space", "llm_mcp {\n server a {\n url http://x\n oauth {\n redirect_url \"http://a b/cb\"\n }\n }\n}", `oauth redirect_url "http://a b/cb" is not a URL with a host`},
		{"bad separator", "llm_mcp {\n separator /\n}", `separator "/"`},
		{"relative allow_commands", "llm_mcp {\n allow_commands bin/mcp-*\n}", `give an absolute, clean path`},
		{"allow_commands without a path", "llm_mcp {\n allow_commands\n}", "wrong argument count"},
		{"neither url nor command", "llm_mcp {\n server a {\n timeout 1s\n }\n}", "set either url"},
		{"both url and command", "llm_mcp {\n server a {\n url http://x\n command /bin/x\n }\n}", "set either url"},
		{"bad scheme", "llm_mcp {\n server a {\n url ftp://x\n }\n}", "must start with http:// or https://"},
		{"bad transport", "llm_mcp {\n server a {\n url http://x\n transport grpc\n }\n}", `transport "grpc"`},
		{"header on command", "llm_mcp {\n server a {\n command /bin/x\n header A b\n }\n}", "apply to url servers only"},
		{"env on url", "llm_mcp {\n server a {\n url http://x\n env A b\n }\n}", "apply to command servers only"},
		{"header one value", "llm_mcp {\n server a {\n url http://x\n header A\n }\n}", "wrong argument count"},
		{"header twice", "llm_mcp {\n server a {\n url http://x\n header A b\n header A c\n }\n}", `"A" given twice`},
		{"command without path", "llm_mcp {\n server a {\n command\n }\n}", "wrong argument count"},
		{"bad timeout", "llm_mcp {\n server a {\n url http://x\n timeout soon\n }\n}", `"soon" is not a positive duration`},
		{"duplicate in server", "llm_mcp {\n server a {\n url http://x\n url http://y\n }\n}", `duplicate subdirective "url" in server "a"`},
		{"unknown in server", "llm_mcp {\n server a {\n url http://x\n token t\n }\n}", `unrecognized subdirective "token" in mcp server "a"`},
		{"tenant without name", "llm_mcp {\n server a {\n url http://x\n tenant key\n }\n}", "wrong argument count"},
		{"tenant bad level", "llm_mcp {\n server a {\n url http://x\n tenant user bob {\n header A b\n }\n }\n}", `tenant level "user"`},
		{"tenant env on url", "llm_mcp {\n server a {\n url http://x\n tenant key k1 {\n env A b\n }\n }\n}", "take header, not env"},
		{"tenant header on command", "llm_mcp {\n server a {\n command /bin/x\n tenant org acme {\n header A b\n }\n }\n}", "take env, not header"},
		{"tenant twice", "llm_mcp {\n server a {\n url http://x\n tenant key k1\n tenant key k1\n }\n}", "given twice"},
		{"tenant unknown", "llm_mcp {\n server a {\n url http://x\n tenant key k1 {\n token t\n }\n }\n}", `unrecognized subdirective "token" in tenant`},
		{"disabled with argument", "llm_mcp {\n server a {\n url http://x\n disabled yes\n }\n}", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Handler).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateSeparatorInName(t *testing.T) {
	h := &Handler{SSEPath: "/sse", Servers: []*ServerConfig{{Name: "git__hub", URL: "http://x"}}}
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), `holds the tool name separator "__"`) {
		t.Errorf("got %v, want an error saying the name holds the separator", err)
	}
	h.Separator = "."
	if err := h.Validate(); err != nil {
		t.Errorf("with separator \".\": %v", err)
	}
}
