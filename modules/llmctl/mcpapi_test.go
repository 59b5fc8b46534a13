package llmctl

import (
	"reflect"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llmmcp"
)

// TestMCPShapesMatchLLMMCP keeps the shapes of mcpapi.go those of the
// llm_mcp handler: the same JSON names, of the same kinds. The config a
// server takes is sent again whole, so its shapes must hold every field;
// the others what the commands read.
func TestMCPShapesMatchLLMMCP(t *testing.T) {
	tests := []struct {
		ours, theirs any
		whole        bool
	}{
		{mcpServerConfig{}, llmmcp.ServerConfig{}, true},
		{mcpTenantCredential{}, llmmcp.TenantCredential{}, true},
		{mcpOAuthConfig{}, llmmcp.OAuthConfig{}, true},
		{mcpAuthorizeRequest{}, llmmcp.AuthorizeRequest{}, true},
		{mcpServerStatus{}, llmmcp.ServerStatus{}, false},
		{mcpAuthorizeResponse{}, llmmcp.AuthorizeResponse{}, false},
		{mcpAuthStatus{}, llmmcp.AuthStatus{}, false},
		{mcpTenantAuth{}, llmmcp.TenantAuth{}, false},
	}
	for _, tt := range tests {
		ours, theirs := jsonFields(reflect.TypeOf(tt.ours)), jsonFields(reflect.TypeOf(tt.theirs))
		for name, tag := range ours {
			if theirs[name] != tag {
				t.Errorf("%T: field %s is %q, llmmcp's %q", tt.ours, name, tag, theirs[name])
			}
		}
		if !tt.whole {
			continue
		}
		for name := range theirs {
			if _, ok := ours[name]; !ok {
				t.Errorf("%T lacks llmmcp's field %s: ctl mcp add would drop it", tt.ours, name)
			}
		}
	}
}

// jsonFields are a struct's JSON names, each with its tag and the kind
// of its type.
func jsonFields(t reflect.Type) map[string]string {
	out := map[string]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		out[name] = tag + " " + f.Type.Kind().String()
	}
	return out
}
