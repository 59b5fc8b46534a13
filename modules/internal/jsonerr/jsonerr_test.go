package jsonerr

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

type scaling struct {
	Min *int `json:"min,omitempty"`
}

type model struct {
	Name    string            `json:"name"`
	Args    []string          `json:"args,omitempty"`
	Options map[string]string `json:"options,omitempty"`
	Scaling *scaling          `json:"scaling,omitempty"`
}

func TestDescribe(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"string for a list", `{"name":"x","args":"--foo"}`, `field "args" is a JSON string; it must be an array`},
		{"nested", `{"name":"x","scaling":{"min":"one"}}`, `field "scaling.min" is a JSON string; it must be an integer`},
		{"number for a string", `{"name":5}`, `field "name" is a JSON number; it must be a string`},
		{"a list for the body", `[1]`, `the body is a JSON array; send an object`},
		{"syntax", `{"name":}`, `not valid JSON`},
		{"empty", ``, `the body is empty`},
		{"cut", `{"name":"x"`, `ends before its JSON does`},
		{"unknown field", `{"name":"x","nope":1}`, `unknown field "nope"; remove it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m model
			dec := json.NewDecoder(strings.NewReader(tt.body))
			dec.DisallowUnknownFields()
			got := Describe(dec.Decode(&m))
			if !strings.Contains(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if strings.Contains(got, "Go struct") || strings.Contains(got, "jsonerr.") {
				t.Fatalf("got %q: it names Go types", got)
			}
		})
	}
}

// Numbers and booleans where strings are wanted become strings; numbers
// where numbers are wanted stay numbers, exact.
func TestLenient(t *testing.T) {
	type scaling struct {
		Max *int `json:"max,omitempty"`
	}
	type model struct {
		Name    string            `json:"name"`
		Options map[string]string `json:"options,omitempty"`
		Args    []string          `json:"args,omitempty"`
		Scaling *scaling          `json:"scaling,omitempty"`
		Share   float64           `json:"share"`
	}
	in := `{"name":7,"options":{"max_tokens":50,"on":true,"rate":0.25,"s":"x"},"args":["--n",4],"scaling":{"max":50},"share":12345678901234567890,"other":1}`
	got := string(Lenient([]byte(in), reflect.TypeOf(model{})))
	want := `{"args":["--n","4"],"name":"7","options":{"max_tokens":"50","on":"true","rate":"0.25","s":"x"},"other":1,"scaling":{"max":50},"share":12345678901234567890}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := string(Lenient([]byte(`{"name":`), reflect.TypeOf(model{}))); got != `{"name":` {
		t.Errorf("not JSON: got %s, want it unchanged", got)
	}
}
