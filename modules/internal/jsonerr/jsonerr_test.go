package jsonerr

import (
	"encoding/json"
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
