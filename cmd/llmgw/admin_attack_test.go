package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAdminLockoutEveryRoute guesses credentials on every route of
// llm_admin that checks one, each from its own client address (the site
// trusts X-Forwarded-For from loopback): after max_failures (4) wrong
// guesses the client is blocked, and even the right token then answers
// 429 with Retry-After, on that route and on every other, so the answers
// cannot tell a right guess from a wrong one.
func TestAdminLockoutEveryRoute(t *testing.T) {
	g := sessionSite(t, filepath.Join(t.TempDir(), "storage"), "")
	bogus := "llmgw_session=" + strings.Repeat("Z", 43)
	guesses := []struct {
		name                string
		token, method, path string
		body                string
		hdr                 []string
	}{
		{name: "bearer on /llm/auth/lang", token: "wrong", method: "POST", path: "/llm/auth/lang", body: `{"lang":"de"}`},
		{name: "login token", method: "POST", path: "/llm/auth/login", body: `{"method":"token","token":"wrong"}`},
		{name: "bearer on an admin route", token: "wrong", method: "GET", path: "/llm/models"},
		{name: "cookie on an admin route", method: "GET", path: "/llm/models", hdr: []string{"Cookie", bogus}},
		{name: "cookie on /llm/auth/session", method: "GET", path: "/llm/auth/session", hdr: []string{"Cookie", bogus}},
		{name: "cookie on /llm/auth/logout", method: "POST", path: "/llm/auth/logout", hdr: []string{"Cookie", bogus}},
		{name: "cookie on /llm/auth/lang", method: "POST", path: "/llm/auth/lang", body: `{"lang":"de"}`, hdr: []string{"Cookie", bogus}},
	}
	for i, c := range guesses {
		ip := fmt.Sprintf("203.0.113.%d", i+1)
		hdr := append([]string{"X-Forwarded-For", ip}, c.hdr...)
		for n := 1; n <= 4; n++ {
			if code, _, body := siteCall(t, g, c.token, c.method, c.path, c.body, hdr...); code != 401 {
				t.Errorf("%s: wrong guess %d: got %d %s, want 401", c.name, n, code, body)
			}
		}
		right := []struct{ method, path, body string }{
			{"POST", "/llm/auth/lang", `{"lang":"de"}`}, {"GET", "/llm/models", ""}, {"GET", "/llm/auth/methods", ""},
		}
		for _, r := range right {
			code, h, body := siteCall(t, g, "ops-token", r.method, r.path, r.body, "X-Forwarded-For", ip)
			retry, _ := strconv.Atoi(h.Get("Retry-After"))
			if code != 429 || retry < 1 || !strings.Contains(body, "too many requests with a wrong token") {
				t.Errorf("%s: then the right token on %s %s: got %d (Retry-After %q) %s, want 429 with Retry-After saying why",
					c.name, r.method, r.path, code, h.Get("Retry-After"), body)
			}
		}
		code, _, body, _ := login(t, g, `{"method":"token","token":"ops-token"}`, "X-Forwarded-For", ip)
		if code != 429 {
			t.Errorf("%s: then signing in with the right token: got %d %s, want 429", c.name, code, body)
		}
	}
	// Another client is not blocked.
	if code, _, body := siteCall(t, g, "ops-token", "POST", "/llm/auth/lang", `{"lang":"de"}`, "X-Forwarded-For", "198.51.100.7"); code != 204 {
		t.Errorf("another client with the right token: got %d %s, want 204", code, body)
	}
}
