package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// kbAdminSite runs llmgw with llm_kb on /v1/*, the admin routes on the
// site behind llm_admin (ops: operator, watcher: viewer; sessions) and
// the console; key secret-1 is of project acme/research/alpha.
func kbAdminSite(t *testing.T) *gateway {
	t.Helper()
	g := &gateway{t: t, dir: t.TempDir(), http: freePort(t), admin: freePort(t), logs: &syncBuffer{}}
	cfg := fmt.Sprintf(`{
	admin 127.0.0.1:%d
	storage file_system %s
	llm {
		model sim-chat {
			engine sim
			option max_tokens 10
		}
		org acme {
			team research {
				project alpha {
					key k1 %s
				}
			}
		}
	}
}

:%d {
	route /v1/* {
		llm_quota
		llm_kb
		llm_router
	}
	route /llm/* {
		llm_admin {
			token ops %s operator
			token watcher %s viewer
			session {
				ttl 1h
			}
		}
	}
	route /console* {
		llm_console
	}
}
`, g.admin, filepath.Join(g.dir, "storage"), tenancy.HashKey("secret-1"), g.http, tenancy.HashKey("ops-token"), tenancy.HashKey("watcher-token"))
	if err := os.WriteFile(filepath.Join(g.dir, "Caddyfile"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start()
	return g
}

// kbUploadBody is a multipart body with a part named field: a file of
// name holding data (no file name when name is "").
func kbUploadBody(t *testing.T, field, name string, data []byte) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	var w io.Writer
	var err error
	if name == "" {
		w, err = mw.CreateFormField(field)
	} else {
		w, err = mw.CreateFormFile(field, name)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(data)
	_ = mw.Close()
	return b.String(), mw.FormDataContentType()
}

// wantRefused checks an attack's answer: the status, and an error
// message that says why.
func kbWantRefused(t *testing.T, what string, status int, body string, wantStatus int, why string) {
	t.Helper()
	var e struct{ Error string }
	_ = json.Unmarshal([]byte(body), &e)
	if status != wantStatus || !strings.Contains(e.Error, why) {
		t.Fatalf("%s: got %d %s, want %d with an error saying %q", what, status, body, wantStatus, why)
	}
}

// TestKBAdmin runs the knowledge bases' operator routes on an admin
// site as an operator, a viewer and an attacker would: a shared store
// made for a team, a file uploaded into it read by a project's key, its
// state, a search, a reindex, the audit log and the deletion; writes of
// a viewer, unknown tenants, path ids, local paths and huge bodies
// refused with 403 or 400 saying why.
func TestKBAdmin(t *testing.T) {
	g := kbAdminSite(t)
	call := func(token, method, path, body string, hdr ...string) (int, string) {
		st, _, b := siteCall(t, g, token, method, path, body, hdr...)
		return st, b
	}
	st, body := call("watcher-token", "GET", "/llm/kb/stores", "")
	if st != 200 || strings.TrimSpace(body) != "[]" {
		t.Fatalf("viewer list: %d %s", st, body)
	}
	st, body = call("watcher-token", "POST", "/llm/kb/stores", `{"tenant":"acme/research","share":true}`)
	kbWantRefused(t, "a viewer creating a store", st, body, 403, "needs the operator role")

	for _, c := range []struct{ name, body, why string }{
		{"unknown tenant", `{"tenant":"acme/nope","share":true}`, "not in the tenancy tree"},
		{"tenant path with ..", `{"tenant":"acme/../etc","share":true}`, "not in the tenancy tree"},
		{"local path", `{"tenant":"acme/research","share":true,"path":"/etc/passwd"}`, `unknown field "path"`},
		{"team without share", `{"tenant":"acme/research"}`, "add \"share\": true"},
		{"huge body", `{"tenant":"acme/research","share":true,"name":"` + strings.Repeat("x", 200<<10) + `"}`, "at most 64 KiB"},
	} {
		st, body := call("ops-token", "POST", "/llm/kb/stores", c.body)
		kbWantRefused(t, c.name, st, body, 400, c.why)
	}
	st, body = call("ops-token", "GET", "/llm/kb/stores?tenant=acme/nope", "")
	kbWantRefused(t, "listing an unknown tenant", st, body, 400, "not in the tenancy tree")

	st, body = call("ops-token", "POST", "/llm/kb/stores", `{"tenant":"acme/research","share":true,"name":"handbook"}`, "X-Llmgw-Actor", "ops")
	var vs llmapi.KBStore
	if err := json.Unmarshal([]byte(body), &vs); st != 201 || err != nil || vs.Tenant != "acme/research" || !vs.Shared || vs.Name != "handbook" {
		t.Fatalf("creating a store: %d %s", st, body)
	}
	kbAdminAttacks(t, g, vs.ID)
	kbAdminFill(t, g, vs.ID)

	st, body = call("watcher-token", "DELETE", "/llm/kb/stores/"+vs.ID, "")
	kbWantRefused(t, "a viewer deleting", st, body, 403, "needs the operator role")
	if st, body = call("ops-token", "DELETE", "/llm/kb/stores/"+vs.ID, ""); st != 200 {
		t.Fatalf("deleting: %d %s", st, body)
	}
	st, body = call("ops-token", "GET", "/llm/kb/stores/"+vs.ID, "")
	kbWantRefused(t, "a deleted store", st, body, 404, "no knowledge base")
	var audit struct{ Entries []llmapi.AuditEntry }
	_, body = call("watcher-token", "GET", "/llm/audit?action=kb", "")
	_ = json.Unmarshal([]byte(body), &audit)
	var actions []string
	for _, e := range audit.Entries {
		actions = append(actions, e.Action+"/"+fmt.Sprint(e.Fields["id"]))
	}
	want := "kb store deleted/" + vs.ID + " kb store reindexed/" + vs.ID + " kb file uploaded/" + vs.ID + " kb store created/" + vs.ID
	if strings.Join(actions, " ") != want {
		t.Fatalf("the audit log's kb entries: %v, want %s", actions, want)
	}
}

// kbAdminAttacks tries what an attacker would on a store's routes.
func kbAdminAttacks(t *testing.T, g *gateway, id string) {
	t.Helper()
	site := func(token, method, path, body string, hdr ...string) (int, string) {
		st, _, b := siteCall(t, g, token, method, path, body, hdr...)
		return st, b
	}
	st, body := site("ops-token", "GET", "/llm/kb/stores/..%2F..%2Fetc%2Fpasswd", "")
	kbWantRefused(t, "an encoded path as an id on the site", st, body, 400, "must be plain")
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/llm/kb/stores/..%%2F..%%2Fetc%%2Fpasswd", g.admin))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	kbWantRefused(t, "an encoded path as an id on the admin endpoint", resp.StatusCode, string(raw), 400, "is no knowledge base id")

	up, ct := kbUploadBody(t, "file", "../../etc/passwd", []byte("root:x:0:0"))
	st, body = site("ops-token", "POST", "/llm/kb/stores/"+id+"/files", up, "Content-Type", ct)
	kbWantRefused(t, "a file name with a path", st, body, 400, "give the file's name alone")
	up, ct = kbUploadBody(t, "path", "", []byte("/etc/passwd"))
	st, body = site("ops-token", "POST", "/llm/kb/stores/"+id+"/files", up, "Content-Type", ct)
	kbWantRefused(t, "a local path instead of a file", st, body, 400, "no part named file")
	st, body = site("ops-token", "POST", "/llm/kb/stores/"+id+"/files", `{"path":"/etc/passwd"}`, "Content-Type", "application/json")
	kbWantRefused(t, "a JSON body naming a local path", st, body, 400, "multipart/form-data")
	up, ct = kbUploadBody(t, "file", "notes.txt", []byte("some notes"))
	st, body = site("watcher-token", "POST", "/llm/kb/stores/"+id+"/files", up, "Content-Type", ct)
	kbWantRefused(t, "a viewer uploading", st, body, 403, "needs the operator role")
	st, body = site("ops-token", "POST", "/llm/kb/stores/"+id+"/search", `{"query":"x","max_num_results":`+strings.Repeat("9", 70<<10)+`}`)
	kbWantRefused(t, "a huge search body", st, body, 400, "at most 64 KiB")
}

// kbAdminFill uploads a file into the store as an operator, waits for
// it, searches it, reads it with the tenant's key and reindexes it.
func kbAdminFill(t *testing.T, g *gateway, id string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "kb", "security.html"))
	if err != nil {
		t.Fatal(err)
	}
	up, ct := kbUploadBody(t, "file", "security.html", data)
	st, _, body := siteCall(t, g, "ops-token", "POST", "/llm/kb/stores/"+id+"/files", up, "Content-Type", ct, "X-Llmgw-Actor", "ops")
	var f llmapi.KBFile
	if err := json.Unmarshal([]byte(body), &f); st != 201 || err != nil || f.Filename != "security.html" || f.Bytes != int64(len(data)) {
		t.Fatalf("uploading: %d %s", st, body)
	}
	d := kbAdminWait(t, g, id, 1, 1)
	st, _, body = siteCall(t, g, "watcher-token", "POST", "/llm/kb/stores/"+id+"/search", `{"query":"password rotation","max_num_results":3}`)
	var res llmapi.KBSearchResults
	if err := json.Unmarshal([]byte(body), &res); st != 200 || err != nil || len(res.Passages) == 0 || res.Passages[0].Filename != "security.html" || res.Passages[0].Score <= 0 {
		t.Fatalf("searching as a viewer: %d %s", st, body)
	}
	c := openai.NewClient(option.WithBaseURL(g.base+"/v1/"), option.WithAPIKey("secret-1"), option.WithMaxRetries(0))
	names, _ := kbSearch(t, c, id, "password rotation", nil)
	if len(names) == 0 || names[0] != "security.html" {
		t.Fatalf("the project's key searching the team's shared store: %v", names)
	}
	st, _, body = siteCall(t, g, "ops-token", "POST", "/llm/kb/stores/"+id+"/reindex", "", "X-Llmgw-Actor", "ops")
	if st != 200 || !strings.Contains(body, `"files":1`) {
		t.Fatalf("reindexing: %d %s", st, body)
	}
	kbAdminWait(t, g, id, 1, d.Version+1)
}

// kbAdminWait waits until the store's files are completed, n of them,
// and its version has reached version.
func kbAdminWait(t *testing.T, g *gateway, id string, n int, version int64) llmapi.KBStoreDetail {
	t.Helper()
	var d llmapi.KBStoreDetail
	waitFor(t, 60*time.Second, "the store's files to be ingested", func() bool {
		_, _, body := siteCall(t, g, "watcher-token", "GET", "/llm/kb/stores/"+id, "")
		d = llmapi.KBStoreDetail{}
		return json.Unmarshal([]byte(body), &d) == nil && d.FileCounts.Completed == n && len(d.Files) == n && d.Files[0].Status == "completed" && d.Version >= version
	})
	if d.Files[0].Filename != "security.html" || d.Files[0].Chunks == 0 || d.Bytes == 0 {
		t.Fatalf("the store's detail: %+v", d)
	}
	return d
}

// TestKBCtlAddFolder runs llmgw ctl kb against a site's llm_admin: a
// shared knowledge base created, a folder added (its readable files in
// subfolders too, a broken PDF failing with its reason, a photo left
// out), listed, searched and deleted.
func TestKBCtlAddFolder(t *testing.T) {
	g := kbAdminSite(t)
	ctl := func(args ...string) (string, error) {
		cmd := exec.Command(binary, append([]string{"ctl", "--url", g.base}, args...)...)
		cmd.Env = append(os.Environ(), "LLMGW_ADMIN_TOKEN=ops-token", "LLMGW_ADMIN_URL=", "LLMGW_ADMIN=")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := ctl("kb", "create", "--tenant", "acme/research", "--share", "handbook")
	if err != nil || !strings.Contains(out, "created for acme/research, shared with every project below it") {
		t.Fatalf("kb create: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, f := range []struct{ from, to string }{{"security.html", "security.html"}, {"travel-policy.md", "policies/travel-policy.md"}, {"onboarding.txt", "policies/people/onboarding.txt"}} {
		data, err := os.ReadFile(filepath.Join("testdata", "kb", f.from))
		if err != nil {
			t.Fatal(err)
		}
		_ = os.MkdirAll(filepath.Dir(filepath.Join(dir, f.to)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, f.to), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.WriteFile(filepath.Join(dir, "policies", "broken.pdf"), []byte("%PDF-1.7\n\x00\x01\x02 cut off here"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "photo.png"), []byte("\x89PNG"), 0o644)
	out, err = ctl("kb", "add", "handbook", dir)
	if err == nil || !strings.Contains(out, "4 files added to vs_") || !strings.Contains(out, "3 completed, 1 failed") ||
		!strings.Contains(out, "failed policies/broken.pdf: ") || !strings.Contains(out, "uploaded policies/people/onboarding.txt") || strings.Contains(out, "photo.png") {
		t.Fatalf("kb add: %v\n%s", err, out)
	}
	if out, err = ctl("kb", "list", "--tenant", "acme"); err != nil || !strings.Contains(out, "4 (3 completed, 1 failed)") {
		t.Fatalf("kb list: %v\n%s", err, out)
	}
	if out, err = ctl("kb", "search", "handbook", "password rotation"); err != nil || !strings.Contains(out, "1. security.html  (score ") {
		t.Fatalf("kb search: %v\n%s", err, out)
	}
	if out, err = ctl("kb", "delete", "handbook"); err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("kb delete: %v\n%s", err, out)
	}
}
