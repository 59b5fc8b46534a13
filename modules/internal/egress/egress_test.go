package egress

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestCheckURL(t *testing.T) {
	p, err := New([]string{"10.9.0.0/16", "127.0.0.7", "models.internal"}, "llm { runtime_hosts … }")
	if err != nil {
		t.Fatal(err)
	}
	p.own = func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("192.0.2.10")} }
	tests := []struct {
		name, url, refused string // refused: a part of the error, "" when allowed
	}{
		{"public address", "https://203.0.113.5/v1", ""},
		{"loopback", "http://127.0.0.1:2019/load", "loopback"},
		{"loopback elsewhere in 127/8", "http://127.1.2.3/", "loopback"},
		{"IPv6 loopback", "http://[::1]:2019/", "loopback"},
		{"IPv4-mapped loopback", "http://[::ffff:127.0.0.1]/", "loopback"},
		{"metadata", "http://169.254.169.254/latest/meta-data/", "link-local"},
		{"IPv6 link-local", "http://[fe80::1]/", "link-local"},
		{"unspecified", "http://0.0.0.0:2019/", "unspecified"},
		{"this network", "http://0.1.2.3/", "0.0.0.0/8"},
		{"multicast", "http://239.1.2.3/", "multicast"},
		{"own address", "http://192.0.2.10:7443/", "this machine"},
		{"localhost by name", "http://localhost:2019/config/", "loopback"},
		{"allowed range", "http://10.9.3.4:8000/v1", ""},
		{"allowed address", "http://127.0.0.7:8000/v1", ""},
		{"allowed name", "https://models.internal/v1", ""},
		{"file scheme", "file:///etc/passwd", "scheme"},
		{"gopher scheme", "gopher://127.0.0.1:6379/", "scheme"},
		{"no host", "http:///x", "no host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := p.CheckURL(context.Background(), tt.url)
			switch {
			case tt.refused == "" && err != nil:
				t.Fatalf("got %v, want allowed", err)
			case tt.refused != "" && err == nil:
				t.Fatalf("got allowed, want refused (%s)", tt.refused)
			case tt.refused != "" && !strings.Contains(err.Error(), tt.refused):
				t.Fatalf("got %v, want it to say %q", err, tt.refused)
			}
		})
	}
}

func TestNewRefusesBadEntries(t *testing.T) {
	for _, e := range []string{"10.0.0.0/33", "http://x", "host:80", "a@b"} {
		if _, err := New([]string{e}, "x"); err == nil {
			t.Errorf("New(%q): got no error", e)
		}
	}
}

// A server the policy allows that redirects to one it does not: the
// redirect's connection is refused.
func TestClientChecksRedirectsAndDials(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("secret"))
	}))
	defer target.Close()
	// 127.0.0.1 is refused; the redirecting server listens there too, so
	// reach it by an allowed name bound to it.
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/latest", http.StatusFound)
	}))
	defer redirect.Close()
	p, err := New([]string{"localhost"}, "x")
	if err != nil {
		t.Fatal(err)
	}
	c := p.Client(5 * time.Second)
	port := redirect.URL[strings.LastIndex(redirect.URL, ":"):]
	resp, err := c.Get("http://localhost" + port + "/")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the redirect to %s was followed: got %s", target.URL, resp.Status)
	}
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("got %v, want a refusal naming the loopback address", err)
	}
	// A direct connection to a refused address fails at dial time too.
	if _, err := c.Get(target.URL); !errors.Is(err, ErrRefused) {
		t.Fatalf("direct request to %s: got %v, want refused", target.URL, err)
	}
	// A redirect to another scheme is refused.
	if err := CheckRedirect(httptest.NewRequest("GET", "file:///etc/passwd", nil), nil); !errors.Is(err, ErrRefused) {
		t.Fatalf("redirect to file://: got %v, want refused", err)
	}
}
