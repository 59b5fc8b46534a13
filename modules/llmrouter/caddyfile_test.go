package llmrouter

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	for _, tc := range []struct {
		name, input, want string
	}{
		{"argument", `llm_router foo`, "wrong argument count"},
		{"unknown subdirective", "llm_router {\n retries 3\n}", `unrecognized llm_router subdirective "retries"`},
		{"duplicate", "llm_router {\n dial_timeout 1s\n dial_timeout 2s\n}", `duplicate subdirective "dial_timeout"`},
		{"policy without name", "llm_router {\n policy\n}", "wrong argument count"},
		{"policy with two names", "llm_router {\n policy a b\n}", "wrong argument count"},
		{"unknown policy", "llm_router {\n policy fastest\n}", `unknown policy "fastest"`},
		{"timeout without value", "llm_router {\n first_byte_timeout\n}", "wrong argument count"},
		{"bad timeout", "llm_router {\n first_byte_timeout later\n}", `"later" is not a positive duration`},
		{"zero timeout", "llm_router {\n dial_timeout 0s\n}", `"0s" is not a positive duration`},
		{"timeout two values", "llm_router {\n dial_timeout 1s 2s\n}", "wrong argument count"},
		{"pool without value", "llm_router {\n max_idle_conns_per_host\n}", "wrong argument count"},
		{"bad pool", "llm_router {\n max_idle_conns_per_host many\n}", `"many" is not a whole number`},
		{"pool two values", "llm_router {\n max_idle_conns_per_host 1 2\n}", "wrong argument count"},
		{"zero max_n", "llm_router {\n max_n 0\n}", `"0" is not a whole number of at least 1`},
		{"max_messages without value", "llm_router {\n max_messages\n}", "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := new(Router).UnmarshalCaddyfile(caddyfile.NewTestDispenser(tc.input))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestUnmarshalCaddyfileLimits(t *testing.T) {
	rt := new(Router)
	if err := rt.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_router {\n max_n 4\n max_messages 100\n}")); err != nil {
		t.Fatal(err)
	}
	if rt.MaxN != 4 || rt.MaxMessages != 100 {
		t.Errorf("got max_n %d, max_messages %d, want 4, 100", rt.MaxN, rt.MaxMessages)
	}
	rt.MaxN = 129
	if err := rt.validateLimits(); err == nil || !strings.Contains(err.Error(), "max_n must be from 1 to 128") {
		t.Errorf("max_n 129: got %v", err)
	}
}

func TestUnmarshalCaddyfileExposeReplica(t *testing.T) {
	rt := new(Router)
	if err := rt.UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_router {\n expose_replica\n}")); err != nil {
		t.Fatal(err)
	}
	if !rt.ExposeReplica {
		t.Error("expose_replica: got false, want true")
	}
	err := new(Router).UnmarshalCaddyfile(caddyfile.NewTestDispenser("llm_router {\n expose_replica yes\n}"))
	if err == nil {
		t.Error("expose_replica with an argument: no error")
	}
}
