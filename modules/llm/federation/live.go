package federation

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// live is one peer as it runs: its client, what its last check found,
// and its models' catalog entries. It outlives a config that leaves the
// peer unchanged (it is kept in a pool).
type live struct {
	peer   *Peer // placeholders resolved
	tr     *http.Transport
	logger *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	once   sync.Once

	mu      sync.Mutex
	state   string    // stateUnknown, stateUp or stateDown
	reason  string    // why it is down
	checked time.Time // the last check
	since   time.Time // when state began
	listed  []string  // the peer's model names its last good check found, matching the globs
	models  map[string]*catalog.Model
	changed chan struct{} // closed when listed changes
}

// States of a peer.
const (
	stateUnknown = "unknown"
	stateUp      = "up"
	stateDown    = "down"
)

// newLive makes the running side of p, loading its CA.
func newLive(p *Peer, logger *zap.Logger) (*live, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if p.CA != "" {
		pem, err := os.ReadFile(p.CA)
		if err != nil {
			return nil, fmt.Errorf("peer %q: reading its ca: %w", p.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("peer %q: ca %s holds no PEM certificate", p.Name, p.CA)
		}
		cfg.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext: dialer.DialContext, TLSClientConfig: cfg, ForceAttemptHTTP2: true,
		TLSHandshakeTimeout: 10 * time.Second, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &live{peer: p, tr: tr, logger: logger.With(zap.String("peer", p.Name)), ctx: ctx, cancel: cancel,
		state: stateUnknown, models: map[string]*catalog.Model{}, changed: make(chan struct{})}, nil
}

// Destruct stops the peer's checks and closes its connections.
func (l *live) Destruct() error {
	l.cancel()
	l.tr.CloseIdleConnections()
	return nil
}

// start begins the checks once.
func (l *live) start() { l.once.Do(func() { go l.run() }) }

// run checks the peer now and then every refresh (every 5s while down)
// until the peer is no longer used.
func (l *live) run() {
	defer func() {
		if r := recover(); r != nil {
			l.logger.Error("peer checks panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	for {
		l.check()
		wait := l.peer.refresh()
		if l.down() != "" {
			wait = min(wait, 5*time.Second)
		}
		select {
		case <-l.ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// check reads the peer's /v1/models and records what it found.
func (l *live) check() {
	ctx, cancel := context.WithTimeout(l.ctx, 10*time.Second)
	defer cancel()
	names, err := l.list(ctx)
	if l.ctx.Err() != nil {
		return
	}
	if err != nil {
		l.setDown(err.Error())
		return
	}
	l.setUp(names)
}

// list reads the names of the peer's models that match its globs.
func (l *live) list(ctx context.Context) ([]string, error) {
	u := l.peer.base() + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if l.peer.Key != "" {
		req.Header.Set("Authorization", "Bearer "+l.peer.Key)
	}
	resp, err := l.tr.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %s", u, l.explain(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s answered %d: %s%s", u, resp.StatusCode, catalog.BoundedLog(string(b)), statusHint(resp.StatusCode))
	}
	var body struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("GET %s: the answer is not a model list: %v", u, err)
	}
	var names []string
	for _, m := range body.Data {
		if catalog.CheckName("", l.peer.prefix()+m.ID) == nil && l.peer.matches(m.ID) {
			names = append(names, m.ID)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// statusHint says what to do about a status the peer answered.
func statusHint(status int) string {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return "; the peer refused the key: check the peer block's key"
	case http.StatusNotFound:
		return "; check the peer's url (its OpenAI-compatible API, such as https://gw.example.com)"
	}
	return ""
}

// explain says why a connection to the peer failed, in words an operator
// can act on.
func (l *live) explain(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknownCA) && l.peer.CA != "":
		return fmt.Sprintf("its certificate is not signed by the CA in %s (%v); give the CA that signed the peer's certificate", l.peer.CA, err)
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("its certificate is not signed by a CA this system trusts (%v); give the peer's CA with ca <file>", err)
	case errors.As(err, &hostname):
		return fmt.Sprintf("its certificate is not valid for its address (%v); use the name the certificate has in url", err)
	case errors.As(err, &invalid):
		return fmt.Sprintf("its certificate is not valid (%v)", err)
	}
	return err.Error() + "; check url and that the peer is up"
}

func (l *live) setDown(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateDown || l.reason != why {
		l.logger.Warn("peer down", zap.String("reason", why))
	}
	if l.state != stateDown {
		l.since = time.Now()
	}
	l.state, l.reason, l.checked = stateDown, why, time.Now()
}

func (l *live) setUp(names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateUp {
		l.logger.Info("peer up", zap.Int("models", len(names)))
		l.since = time.Now()
	}
	l.state, l.reason, l.checked = stateUp, "", time.Now()
	if !slices.Equal(names, l.listed) {
		l.listed = names
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// down is why the peer is down, or "" when it is up or not checked yet.
func (l *live) down() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateDown {
		return ""
	}
	return fmt.Sprintf("peer %q (%s) is down: %s", l.peer.Name, l.peer.URL, l.reason)
}

// keyFor is the key a request of tenant t is sent to the peer with: its
// project's, else its team's, else its organisation's, else the default.
func (l *live) keyFor(t *tenancy.Tenant) string {
	if t != nil {
		for _, level := range []string{t.Project, t.Team, t.Org} {
			for _, tk := range l.peer.Tenants {
				if level != "" && tk.Tenant == level {
					return tk.Key
				}
			}
		}
	}
	return l.peer.Key
}
