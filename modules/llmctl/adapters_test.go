package llmctl

import (
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

func TestModelAdapters(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"GET /llm/models/chat": {body: llmapi.ModelStatus{Name: "chat", Adapters: []*catalog.Adapter{
			{Name: "sql", Source: "/w/sql.gguf"}, {Name: "legal", Source: "mirror://legal/v1", Scale: 0.5}}}},
		"GET /llm/models/bare":           {body: llmapi.ModelStatus{Name: "bare"}},
		"POST /llm/models/chat/settings": {body: llmapi.Rollout{ModelStatus: llmapi.ModelStatus{Name: "chat"}, Replaced: []string{"chat-1"}, Started: []string{"chat-2"}}},
	})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"model", "adapter", "list", "chat"}, lines(
			"NAME   SOURCE             SCALE",
			"sql    /w/sql.gguf        1",
			"legal  mirror://legal/v1  0.5")},
		// --json lists them even when the model has none.
		{[]string{"--json", "model", "adapter", "list", "bare"}, "[]\n"},
		{[]string{"model", "adapter", "add", "chat", "poem", "/w/poem.gguf", "--scale", "0.8"}, "model chat: replaced chat-1 with chat-2\n"},
		{[]string{"model", "adapter", "remove", "chat", "sql"}, "model chat: replaced chat-1 with chat-2\n"},
	}
	for _, tt := range tests {
		out, _, err := run(t, a, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		check(t, strings.Join(tt.args, " "), out, tt.want)
	}
	checkSent(t, a,
		"GET /llm/models/chat",
		"GET /llm/models/bare",
		"GET /llm/models/chat",
		`POST /llm/models/chat/settings {"adapters":[{"name":"sql","source":"/w/sql.gguf"},{"name":"legal","source":"mirror://legal/v1","scale":0.5},{"name":"poem","source":"/w/poem.gguf","scale":0.8}]}`,
		"GET /llm/models/chat",
		`POST /llm/models/chat/settings {"adapters":[{"name":"legal","source":"mirror://legal/v1","scale":0.5}]}`)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"model", "adapter", "add", "chat", "sql", "/w/x.gguf"}, "model chat already has adapter sql; remove it first to change it"},
		{[]string{"model", "adapter", "remove", "chat", "nope"}, "model chat has no adapter nope (llmgw ctl model adapter list chat shows them)"},
	} {
		if _, _, err := run(t, a, tt.args...); err == nil || err.Error() != tt.want {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}
