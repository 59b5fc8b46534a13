package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// TestClusterAdminSessions signs in on one node of a cluster and uses the
// session on another: sessions live in the cluster's Redis, not in each
// node's own storage, so sign-out on one node ends the session on all.
func TestClusterAdminSessions(t *testing.T) {
	c := startClusterOn(t, 0, fmt.Sprintf(clusterModels, tenancy.HashKey("secret-1")), startRedis(t), "")
	c.routes = fmt.Sprintf(`
	route /llm/* {
		llm_admin {
			token ops %s operator
			token watcher %s viewer
		}
	}`, tenancy.HashKey("ops-token"), tenancy.HashKey("watcher-token"))
	n1, n2 := c.add("n1"), c.add("n2")

	code, s, body, _ := login(t, n1, `{"method":"token","token":"ops-token"}`)
	if code != 200 {
		t.Fatalf("sign-in on n1: %d %s", code, body)
	}
	// n2 knows the session n1 made, with its CSRF token and role.
	if code, _, body = siteCall(t, n2, "", "GET", "/llm/auth/session", "", "Cookie", s.cookie); code != 200 || !strings.Contains(body, s.CSRFToken) || !strings.Contains(body, `"role":"operator"`) {
		t.Fatalf("n1's session on n2: got %d %s", code, body)
	}
	// A change through n2 with n1's session is made and attributed.
	code, _, body = siteCall(t, n2, "", "POST", "/llm/models/chat/stop", "", "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken)
	if code != 200 || !strings.Contains(body, "stopped") {
		t.Fatalf("stop through n2 with n1's session: got %d %s", code, body)
	}
	waitFor(t, 10*time.Second, "the change attributed to token:ops on n2", func() bool {
		return strings.Contains(n2.logs.String(), `"actor":"token:ops"`)
	})
	// Without the CSRF token, still refused on the other node.
	if code, _, body = siteCall(t, n2, "", "POST", "/llm/models/chat/start", "", "Cookie", s.cookie); code != 403 {
		t.Errorf("a change without X-CSRF-Token on n2: got %d %s, want 403", code, body)
	}
	// A language chosen on n2 is what n1 signs the person in with.
	if code, _, body = siteCall(t, n2, "", "POST", "/llm/auth/lang", `{"lang":"de"}`, "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken); code != 204 {
		t.Errorf("lang on n2: got %d %s", code, body)
	}
	if _, s2, _, _ := login(t, n1, `{"method":"token","token":"ops-token"}`); s2.Lang != "de" {
		t.Errorf("language at the next sign-in on n1: got %q, want de", s2.Lang)
	}

	// The nodes' own storage holds no session: they are in Redis only.
	for _, g := range []*gateway{n1, n2} {
		if ents, err := os.ReadDir(filepath.Join(g.dir, "storage", "llmgw", "admin", "sessions")); err == nil && len(ents) > 0 {
			t.Errorf("a node's own storage holds %d sessions", len(ents))
		}
	}

	// Sign-out on n2 ends the session on n1 too.
	if code, _, body = siteCall(t, n2, "", "POST", "/llm/auth/logout", "", "Cookie", s.cookie, "X-CSRF-Token", s.CSRFToken); code != 204 {
		t.Fatalf("logout on n2: got %d %s", code, body)
	}
	if code, _, body = siteCall(t, n1, "", "GET", "/llm/models", "", "Cookie", s.cookie); code != 401 {
		t.Errorf("n1 after sign-out on n2: got %d %s, want 401", code, body)
	}

	// Sign-out everywhere on n1 ends every session of the identity,
	// including those made on n2.
	_, a, _, _ := login(t, n1, `{"method":"token","token":"watcher-token"}`)
	_, b, _, _ := login(t, n2, `{"method":"token","token":"watcher-token"}`)
	if code, _, body = siteCall(t, n1, "", "POST", "/llm/auth/logout?everywhere=1", "", "Cookie", a.cookie, "X-CSRF-Token", a.CSRFToken); code != 204 {
		t.Fatalf("logout everywhere on n1: got %d %s", code, body)
	}
	for _, g := range []*gateway{n1, n2} {
		if code, _, body = siteCall(t, g, "", "GET", "/llm/auth/session", "", "Cookie", b.cookie); code != 401 {
			t.Errorf("n2's watcher session after sign-out everywhere: got %d %s, want 401", code, body)
		}
	}
}
