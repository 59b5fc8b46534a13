package llmctl

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
)

// sent is one request the CLI made: method, path with query, body.
type sent struct {
	method, path, body string
	auth               string
}

// answer is what the admin server says to one route: a status (0 is
// 200) and a body, a Go value sent as JSON or a string sent as it is.
type answer struct {
	status int
	body   any
}

// admin is an httptest admin endpoint: it answers the routes it is given
// ("GET /llm/models") and records every request the CLI sends.
type admin struct {
	*httptest.Server
	mu   sync.Mutex
	sent []sent
}

func newAdmin(t *testing.T, routes map[string]answer) *admin {
	t.Helper()
	a := &admin{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.sent = append(a.sent, sent{method: r.Method, path: r.URL.RequestURI(), body: string(raw), auth: r.Header.Get("Authorization")})
		a.mu.Unlock()
		ans, ok := routes[r.Method+" "+r.URL.RequestURI()]
		if !ok {
			t.Errorf("unexpected request %s %s %s", r.Method, r.URL.RequestURI(), raw)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		if ans.status != 0 {
			w.WriteHeader(ans.status)
		}
		if s, ok := ans.body.(string); ok {
			_, _ = io.WriteString(w, s)
			return
		}
		_ = json.NewEncoder(w).Encode(ans.body)
	}))
	t.Cleanup(a.Close)
	return a
}

// requests are the requests the CLI sent, as "METHOD path body" lines.
func (a *admin) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, s := range a.sent {
		out = append(out, strings.TrimSpace(s.method+" "+s.path+" "+s.body))
	}
	return out
}

// run runs "llmgw ctl --admin <a> args…" and returns what it printed on
// stdout and stderr, and its error (the command exits 1 with it).
func run(t *testing.T, a *admin, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	t.Setenv("LLMGW_ADMIN_TOKEN", "")
	t.Setenv("LLMGW_ADMIN_URL", "")
	t.Setenv("LLMGW_ADMIN", "")
	var out, errOut bytes.Buffer
	c := &ctl{out: &out, errOut: &errOut}
	root := &cobra.Command{Use: "ctl", SilenceUsage: true, SilenceErrors: true}
	c.register(root)
	if a != nil {
		args = append([]string{"--admin", a.URL}, args...)
	}
	root.SetArgs(args)
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

// check compares what a command printed and sent with what a user and
// the admin endpoint should see.
func check(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s: got\n%s\nwant\n%s", what, got, want)
	}
}

func checkSent(t *testing.T, a *admin, want ...string) {
	t.Helper()
	check(t, "requests", strings.Join(a.requests(), "\n"), strings.Join(want, "\n"))
}

// lines joins golden lines with newlines, the last one ended too.
func lines(ls ...string) string {
	return strings.Join(ls, "\n") + "\n"
}

// TestErrorsShowTheServersMessage: a 4xx with a JSON error exits with
// that message as it is; an answer without one names the request and
// status; Caddy's "host not allowed" gets the hint how to fix it.
func TestErrorsShowTheServersMessage(t *testing.T) {
	a := newAdmin(t, map[string]answer{
		"POST /llm/models/nope/stop": {404, `{"error":"model \"nope\" not found; llmgw ctl models lists them"}`},
		"GET /llm/models":            {500, "boom\n"},
		"GET /llm/keys":              {403, `{"error":"host not allowed: 127.0.0.1"}`},
	})
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"json error", []string{"model", "stop", "nope"}, `model "nope" not found; llmgw ctl models lists them`},
		{"plain error", []string{"models"}, "GET /llm/models: 500 Internal Server Error: boom"},
		{"host not allowed", []string{"keys"}, "host not allowed: 127.0.0.1; Caddy's admin endpoint accepts only the hosts its origins list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := run(t, a, tt.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("got %v, want an error starting %q", err, tt.want)
			}
			if out != "" {
				t.Errorf("printed %q on a failed call", out)
			}
		})
	}
}

// TestUnreachableAdmin names the endpoint and what to check.
func TestUnreachableAdmin(t *testing.T) {
	a := newAdmin(t, nil)
	a.Close()
	_, _, err := run(t, a, "models")
	if err == nil || !strings.Contains(err.Error(), "reaching llmgw's admin endpoint at "+a.URL) || !strings.HasSuffix(err.Error(), "is llmgw running, and is --admin right?") {
		t.Errorf("got %v", err)
	}
}

// TestURLAndToken: --url reaches a site's llm_admin under /llm with the
// token as a bearer; a token is never sent over plain http off loopback.
func TestURLAndToken(t *testing.T) {
	a := newAdmin(t, map[string]answer{"GET /llm/models": {body: []any{}}})
	_, _, err := run(t, nil, "--url", a.URL, "--token", "s3cret", "models")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.sent) != 1 || a.sent[0].path != "/llm/models" || a.sent[0].auth != "Bearer s3cret" {
		t.Errorf("sent %+v", a.sent)
	}
	_, _, err = run(t, nil, "--url", "http://gw.example.com", "--token", "s3cret", "models")
	want := "--url http://gw.example.com is plain http: the token would cross the network readable; use https://"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}

// Under sudo the actor is the person who ran sudo, not root.
func TestActorUnderSudo(t *testing.T) {
	t.Setenv("SUDO_USER", "alice")
	if got := actor(); got != "alice" {
		t.Errorf("actor under sudo: got %q, want alice", got)
	}
	t.Setenv("SUDO_USER", "")
	if got, u := actor(), os.Getenv("USER"); got == "alice" || got == "" {
		t.Errorf("actor without sudo: got %q (USER %q), want the OS user", got, u)
	}
}
