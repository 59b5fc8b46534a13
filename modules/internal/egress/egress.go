// Package egress decides which addresses a URL set at run time, through
// the admin API, may reach. What the gateway may reach is the config
// file's decision, never a request's: loopback, link-local (where cloud
// metadata services answer), unspecified and multicast addresses, and
// this machine's own addresses (its admin endpoint, its node-to-node
// endpoint, its engines) are refused unless the config file allows a
// host or a range. Addresses are checked when a URL is given, and again
// on every connection (after DNS resolution, and on every redirect), so
// a name that resolves differently later is caught too.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrRefused is the error of a URL or address the policy refuses.
var ErrRefused = errors.New("refused")

// Policy is what URLs set at run time may reach. The zero value is not
// usable; make one with New.
type Policy struct {
	allow []netip.Prefix
	hosts map[string]bool // lower-case names allowed whatever they resolve to
	own   func() []netip.Addr
	// what the error tells the operator to change
	hint string
}

// New makes a policy that also allows the given hosts: an IP address, a
// CIDR range (10.0.0.0/8, fd00::/8) or a host name (allowed by name,
// whatever it resolves to). hint names the config setting that lists
// them, for error messages.
func New(allow []string, hint string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}, own: ownAddrs, hint: hint}
	for _, a := range allow {
		a = strings.TrimSpace(a)
		switch {
		case a == "":
			continue
		case strings.Contains(a, "/"):
			pf, err := netip.ParsePrefix(a)
			if err != nil {
				return nil, fmt.Errorf("allowed range %q: %w; give a CIDR range such as 10.0.0.0/8", a, err)
			}
			p.allow = append(p.allow, pf.Masked())
		default:
			if ip, err := netip.ParseAddr(strings.Trim(a, "[]")); err == nil {
				p.allow = append(p.allow, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
				continue
			}
			if strings.ContainsAny(a, ":@?#") {
				return nil, fmt.Errorf("allowed host %q: give a host name, an IP address or a CIDR range, without a port or scheme", a)
			}
			p.hosts[strings.ToLower(strings.TrimSuffix(a, "."))] = true
		}
	}
	return p, nil
}

// CheckURL parses raw and checks that it is an http or https URL whose
// host the policy allows: by name, or by every address it resolves to.
func (p *Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %s: the scheme must be http or https", redact(u))
	}
	host := u.Hostname()
	if host == "" {
		return nil, fmt.Errorf("URL %s has no host", redact(u))
	}
	if p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))] {
		return u, nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return u, p.checkAddr(host, ip)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("URL %s: resolving %s: %w", redact(u), host, err)
	}
	for _, ip := range ips {
		if err := p.checkAddr(host, ip); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// CheckAddr checks one address the policy would connect to.
func (p *Policy) CheckAddr(ip netip.Addr) error { return p.checkAddr(ip.String(), ip) }

func (p *Policy) checkAddr(host string, ip netip.Addr) error {
	ip = ip.Unmap()
	for _, pf := range p.allow {
		if pf.Contains(ip) {
			return nil
		}
	}
	why := ""
	switch {
	case ip.IsLoopback():
		why = "a loopback address"
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		why = "a link-local address (where cloud metadata services answer)"
	case ip.IsUnspecified():
		why = "the unspecified address"
	case ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		why = "a multicast address"
	case ip.Is4() && ip.As4()[0] == 0:
		why = "an address of this network (0.0.0.0/8)"
	default:
		for _, own := range p.own() {
			if own == ip {
				why = "an address of this machine"
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	if host != ip.String() {
		host = fmt.Sprintf("%s (%s)", host, ip)
	}
	return fmt.Errorf("%w: %s is %s; URLs set at run time may not reach it unless the config file allows it (%s)", ErrRefused, host, why, p.hint)
}

// Control is a net.Dialer Control function that refuses connections to
// addresses the policy refuses: it sees the address after resolution.
func (p *Policy) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot check address %q", ErrRefused, address)
	}
	return p.CheckAddr(ap.Addr())
}

// DialContext dials as d does, checking every address it connects to,
// except for hosts the policy allows by name.
func (p *Policy) DialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	checked := *d
	checked.Control = p.Control
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))] {
			return d.DialContext(ctx, network, addr)
		}
		return checked.DialContext(ctx, network, addr)
	}
}

// Transport returns an HTTP transport that checks every connection and
// uses no proxy (a proxy would connect on its behalf, unchecked).
func (p *Policy) Transport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = p.DialContext(&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second})
	return t
}

// CheckRedirect is an http.Client CheckRedirect that follows at most 10
// redirects, to http and https URLs only; their addresses are checked
// when the transport connects.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect to %s: the scheme must be http or https", ErrRefused, redact(req.URL))
	}
	return nil
}

// Client returns an HTTP client with the policy's transport.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: p.Transport(), Timeout: timeout, CheckRedirect: CheckRedirect}
}

// redact is a URL without its user info, query and fragment: they may
// hold secrets.
func redact(u *url.URL) string {
	c := *u
	c.User, c.RawQuery, c.Fragment = nil, "", ""
	return c.String()
}

// ownAddrs are this machine's interface addresses.
func ownAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if pf, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, pf.Addr().Unmap())
		}
	}
	return out
}
