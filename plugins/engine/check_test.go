package engine

import (
	"strings"
	"testing"
)

func TestCheckArgs(t *testing.T) {
	info := Info{Type: "x", ReservedArgs: []string{"--host", "--port", "-listen", "-p"}}
	for _, tc := range []struct {
		name string
		args []string
		want string // "" = accepted
	}{
		{"none", nil, ""},
		{"other flags", []string{"--threads", "4", "--hostname-file", "f"}, ""},
		{"host", []string{"--host", "0.0.0.0"}, "args must not set --host"},
		{"host with =", []string{"--host=0.0.0.0"}, "args must not set --host"},
		{"port after others", []string{"--threads", "4", "--port", "9"}, "args must not set --port"},
		{"abbreviation", []string{"--ho", "0.0.0.0"}, "args must not set --host"},
		{"single dash long", []string{"-listen=:9"}, "args must not set -listen"},
		{"short with value", []string{"-p9000"}, "args must not set -p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := info.CheckArgs(tc.args)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "loopback") {
				t.Fatalf("got %v, want an error with %q that says why", err, tc.want)
			}
		})
	}
	flags := Info{Type: "x", ArgFlags: []string{"--ttft", "--echo"}}
	if err := flags.CheckArgs([]string{"--ttft", "1s", "--echo=true", "-1"}); err != nil {
		t.Errorf("listed flags: %v", err)
	}
	if err := flags.CheckArgs([]string{"--flash-attn"}); err == nil || !strings.Contains(err.Error(), "no flag --flash-attn; its flags are --ttft, --echo") {
		t.Errorf("unlisted flag: got %v", err)
	}
}

func TestCheckOptions(t *testing.T) {
	info := Info{Type: "sim", Options: []Option{
		{Name: "ttft", Type: TypeDuration}, {Name: "rate", Type: TypeNumber}, {Name: "n", Type: TypeInteger},
		{Name: "on", Type: TypeBool}, {Name: "param_*"},
	}}
	for _, tc := range []struct {
		name string
		opts map[string]string
		want string
	}{
		{"good", map[string]string{"ttft": "2s", "rate": "2.5", "n": "3", "on": "true", "param_stop": "x"}, ""},
		{"placeholder", map[string]string{"n": "{env.N}"}, ""},
		{"unknown", map[string]string{"rat": "1"}, `engine sim has no option "rat"; known options: ttft, rate, n, on, param_*`},
		{"family needs a name", map[string]string{"param_": "1"}, `no option "param_"`},
		{"duration", map[string]string{"ttft": "2"}, "option ttft: \"2\" is not a duration"},
		{"number", map[string]string{"rate": "fast"}, "not a number"},
		{"integer", map[string]string{"n": "1.5"}, "not a whole number"},
		{"bool", map[string]string{"on": "yes"}, "use true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := info.CheckOptions(tc.opts)
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
	if err := (Info{Type: "old"}).CheckOptions(map[string]string{"anything": "x"}); err != nil {
		t.Errorf("an engine that declares no options is not checked: %v", err)
	}
}

// Errors quote at most a bounded piece of what they refuse.
func TestCheckErrorsBounded(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	info := Info{Type: "sim", Options: []Option{{Name: "n", Type: TypeInteger}}, ReservedArgs: []string{"--listen"}, ArgFlags: []string{"--ttft"}}
	for name, err := range map[string]error{
		"option name":  info.CheckOptions(map[string]string{huge: "1"}),
		"option value": info.CheckOptions(map[string]string{"n": huge}),
		"reserved arg": info.CheckArgs([]string{"--listen=" + huge}),
		"unknown flag": info.CheckArgs([]string{"--" + huge}),
	} {
		if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "bytes more") {
			t.Errorf("%s: %.400v", name, err)
		}
	}
}

// A model without a required option is refused with the option's name,
// an example and what it is for; a placeholder counts as set.
func TestCheckOptionsRequired(t *testing.T) {
	info := Info{Type: "openai", Options: []Option{
		{Name: "base_url", Required: true, Example: "https://api.openai.com/v1", Description: "the provider's API"},
		{Name: "api_key", Secret: true},
	}}
	for _, tc := range []struct {
		name string
		opts map[string]string
		want string // "" = accepted
	}{
		{"missing", map[string]string{"api_key": "k"}, "engine openai needs option base_url, such as https://api.openai.com/v1; set it in the model's options (the provider's API)"},
		{"empty", map[string]string{"base_url": " "}, "needs option base_url"},
		{"set", map[string]string{"base_url": "http://x/v1"}, ""},
		{"placeholder", map[string]string{"base_url": "{env.BASE}"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := info.CheckOptions(tc.opts)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}
