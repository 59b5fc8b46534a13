package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// A model served under a licence answers no tenant until the licence is
// accepted for it: jobs, images and chat get 403 naming the licence and
// the command that accepts it. A tenant admin accepts it for its own
// part of the tenancy only; the operator for everyone; each acceptance
// is in the audit log.
func TestModelLicence(t *testing.T) {
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}, exited: make(chan struct{}),
		quota: new(string), before: "\t\tllm_jobs\n", routes: fmt.Sprintf(`route /llm/* {
		llm_admin {
			token acme-lead %s tenant_admin org acme
			token acme2-lead %s tenant_admin org acme2
			token watcher %s viewer
		}
	}`, tenancy.HashKey("acme-lead-token"), tenancy.HashKey("acme2-lead-token"), tenancy.HashKey("watcher-token"))}
	g.writeConfig(`
		model pictures {
			engine simimage
			option step_time 5ms
			target_concurrency 1
			licence flux-dev-nc https://example.com/flux-dev-licence
		}
		model flaky {
			engine sim
			option fail_status 500
			fallback chat
		}
		model chat {
			engine sim
			licence llama3.1-community {
				url https://example.com/llama-3.1-licence
				text "Built with Llama"
			}
		}`+tenancyBlock("", "", "", "")+`
		org acme2 {
			team sales {
				project beta {
					key k3 `+tenancy.HashKey("secret-3")+`
				}
			}
		}`, "")
	g.start()
	g.readyReplicas("pictures", 1)

	refused := func(key, what, path, body string) {
		t.Helper()
		code, _, raw := jobCall(t, g, key, "POST", path, body)
		if code != 403 || !strings.Contains(raw, "licence_not_accepted") || !strings.Contains(raw, "llmgw ctl model licence accept") {
			t.Errorf("%s before the licence is accepted: %d %s", what, code, raw)
		}
	}
	refused("secret-1", "a job", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`)
	refused("secret-1", "an image", "/v1/images/generations", `{"model":"pictures","prompt":"a fox","size":"64x64"}`)
	refused("secret-1", "a chat", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
	_, _, raw := jobCall(t, g, "secret-1", "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`)
	if !strings.Contains(raw, "flux-dev-nc") || !strings.Contains(raw, "https://example.com/flux-dev-licence") || !strings.Contains(raw, "--tenant acme") {
		t.Errorf("the refusal does not name the licence and the command: %s", raw)
	}

	// Tenant admins accept within their organisation only; viewers not at all.
	for _, tc := range []struct {
		token, body string
		code        int
	}{
		{"acme2-lead-token", `{"tenant":"acme"}`, 403},
		{"acme2-lead-token", `{"tenant":"acme/research"}`, 403},
		{"acme2-lead-token", `{}`, 403}, // everyone: the operator's choice
		{"watcher-token", `{"tenant":"acme"}`, 403},
		{"acme-lead-token", `{"tenant":"acme/nope"}`, 400},
		{"acme-lead-token", `{"tenant":"acme/research"}`, 200},
		{"acme2-lead-token", `{"tenant":"acme2"}`, 200},
	} {
		code, _, body := siteCall(t, g, tc.token, "POST", "/llm/models/pictures/licence/accept", tc.body)
		if code != tc.code {
			t.Errorf("%s accepting %s: %d %s, want %d", tc.token, tc.body, code, body, tc.code)
		}
	}
	for _, key := range []string{"secret-1", "secret-3"} {
		_, j, raw := jobCall(t, g, key, "POST", "/v1/jobs", `{"model":"pictures","workflow":`+workflow("2")+`}`)
		if j.ID == "" {
			t.Fatalf("a job once the licence is accepted, with %s: %s", key, raw)
		}
		if seen := followJob(t, g, key, j.ID); seen[len(seen)-1].State != "succeeded" {
			t.Errorf("the job of %s: %+v", key, seen[len(seen)-1])
		}
	}
	// Each model's licence is its own: chat is still refused, and is no
	// fallback for a model without a licence either.
	refused("secret-3", "a chat of another licence", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"hi"}]}`)
	if code, _, raw := jobCall(t, g, "secret-3", "POST", "/v1/chat/completions", `{"model":"flaky","messages":[{"role":"user","content":"hi"}]}`); code == 200 {
		t.Errorf("a fallback under a licence not accepted served the caller: %s", raw)
	}
	out, err := ctlRun(t, g, "model", "licence", "accept", "chat", "--everyone")
	if err != nil || !strings.Contains(out, "llama3.1-community") || !regexpLine(out, "everyone") {
		t.Errorf("ctl model licence accept --everyone: %v\n%s", err, out)
	}
	for _, model := range []string{"chat", "flaky"} { // flaky: through its fallback
		if code, _, raw := jobCall(t, g, "secret-3", "POST", "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
			t.Errorf("%s once chat's licence is accepted for everyone: %d %s", model, code, raw)
		}
	}
	out, err = ctlRun(t, g, "model", "licence", "pictures")
	if err != nil || !regexpLine(out, "acme/research", "acme-lead") || !regexpLine(out, "acme2", "acme2-lead") {
		t.Errorf("ctl model licence: %v\n%s", err, out)
	}
	if out, err := ctlRun(t, g, "model", "licence", "accept", "pictures"); err == nil || !strings.Contains(out, "--everyone") {
		t.Errorf("ctl model licence accept without whom: %v\n%s", err, out)
	}
	_, _, audit := siteCall(t, g, "watcher-token", "GET", "/llm/audit?action=licence+accepted", "")
	if strings.Count(audit, "licence accepted") < 3 {
		t.Errorf("the audit log of the acceptances: %s", audit)
	}
}
