package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// TestModelSettingsAndCanary changes a runtime model's class, owner,
// fallbacks and canary over the admin API and ctl: requests follow at
// once and the replicas keep running.
func TestModelSettingsAndCanary(t *testing.T) {
	g := startGateway(t, `
		model chat {
			engine sim
			min 1
		}`, "")
	for _, m := range []string{"stable", "next"} {
		code, body := adminDo(t, g, "POST", "/llm/models", fmt.Sprintf(`{"name":%q,"engine":"sim","scaling":{"min":1}}`, m))
		if code != 201 {
			t.Fatalf("add %s: %d %s", m, code, body)
		}
	}
	before := g.readyReplicas("stable", 1)[0].ID
	g.readyReplicas("next", 1)

	served := func(n int) map[string]int {
		out := map[string]int{}
		for range n {
			resp, body := post(t, g.base+"/v1/chat/completions", `{"model":"stable","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != 200 {
				t.Fatalf("chat: %d %s", resp.StatusCode, body)
			}
			rep := resp.Header.Get("X-Llm-Replica")
			out[rep[:strings.LastIndexByte(rep, '-')]]++
		}
		return out
	}
	if got := served(10); got["stable"] != 10 {
		t.Fatalf("without a canary: %v", got)
	}

	code, body := adminDo(t, g, "POST", "/llm/models/stable/settings", `{"canary":{"model":"next","share":0.5},"class":"critical","owner":"acme/research","fallbacks":["chat"]}`)
	if code != 200 {
		t.Fatalf("settings: %d %s", code, body)
	}
	var st llmapi.ModelStatus
	_ = json.Unmarshal(body, &st)
	if st.Class != "critical" || st.Owner != "acme/research" || strings.Join(st.Fallbacks, ",") != "chat" || st.Canary == nil || st.Canary.Model != "next" {
		t.Errorf("status after settings: %+v", st)
	}
	got := served(40)
	if got["next"] == 0 || got["stable"] == 0 || got["next"]+got["stable"] != 40 {
		t.Errorf("a 50%% canary served %v", got)
	}
	if after := g.readyReplicas("stable", 1)[0].ID; after != before {
		t.Errorf("the replica changed from %s to %s: settings must not restart it", before, after)
	}

	// Refusals: unknown models, bad shares, config models.
	for _, tc := range []struct{ path, body, want string }{
		{"/llm/models/stable/settings", `{"fallbacks":["nope"]}`, `fallback "nope" is not in the catalog`},
		{"/llm/models/stable/settings", `{"canary":{"model":"nope","share":0.1}}`, `canary "nope" is not in the catalog`},
		{"/llm/models/stable/settings", `{"canary":{"model":"next","share":2}}`, "must be between 0 and 1"},
		{"/llm/models/stable/settings", `{"class":"vip"}`, `class "vip"`},
		{"/llm/models/stable/settings", `{"colour":"red"}`, "unknown field"},
		{"/llm/models/chat/scale", `{"min":2}`, "declared in the config file; change its scaling there"},
	} {
		code, body := adminDo(t, g, "POST", tc.path, tc.body)
		var e struct{ Error string }
		_ = json.Unmarshal(body, &e)
		if code < 400 || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s %s: %d %s, want %q", tc.path, tc.body, code, body, tc.want)
		}
	}

	out, err := ctlRun(t, g, "model", "set", "stable", "--canary", "off", "--fallbacks", "", "--class", "opportunistic")
	if err != nil || !strings.Contains(out, "model stable: class opportunistic") || !strings.Contains(out, "canary none") {
		t.Errorf("ctl model set: %v\n%s", err, out)
	}
	if got := served(10); got["stable"] != 10 {
		t.Errorf("after the canary is removed: %v", got)
	}

	// A model from the config file takes settings too; they are laid
	// over the file at every start and reload.
	chatReplica := g.readyReplicas("chat", 1)[0].ID
	code, body = adminDo(t, g, "POST", "/llm/models/chat/settings", `{"class":"critical","canary":{"model":"stable","share":1}}`)
	if code != 200 {
		t.Fatalf("settings on a config model: %d %s", code, body)
	}
	resp, _ := post(t, g.base+"/v1/chat/completions", `{"model":"chat","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	if rep := resp.Header.Get("X-Llm-Replica"); !strings.HasPrefix(rep, "stable-") {
		t.Errorf("a 100%% canary on chat was served by %s", rep)
	}
	g.reload(`
		model chat {
			engine sim
			min 1
		}`, "")
	if m := g.models()["chat"]; m.Class != "critical" || m.Canary == nil || len(m.Replicas) != 1 || m.Replicas[0].ID != chatReplica {
		t.Errorf("after a reload: %+v (replica was %s)", m, chatReplica)
	}

	// Settings survive a restart.
	g.stop()
	g.start()
	if m := g.models()["stable"]; m.Class != "opportunistic" || m.Owner != "acme/research" || m.Canary != nil {
		t.Errorf("stable after a restart: %+v", m)
	}
	if m := g.models()["chat"]; m.Class != "critical" || m.Canary == nil || m.Canary.Model != "stable" {
		t.Errorf("chat after a restart: %+v", m)
	}
}
