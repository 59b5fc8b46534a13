package llmmcp

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/egress"
)

// upstreams holds one connection per upstream config, shared by the
// gateways that use it, so a reload that keeps a server keeps its process
// and session.
var upstreams = caddy.NewUsagePool()

// now is the clock; tests may replace it.
var now = time.Now

// catalog is what an upstream offers, replaced whole when it changes.
type catalog struct {
	tools     []*mcp.Tool
	resources []*mcp.Resource
	prompts   []*mcp.Prompt
}

// upstream is a supervised client connection to one MCP server.
type upstream struct {
	cfg    *ServerConfig
	key    string
	logger *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc

	hc       *http.Client // a url server's, with its headers
	tok      *tokenEntry  // an OAuth server's tokens for this session
	dormant  bool         // an OAuth server's own entry when tokens are per tenant: never connects
	session  atomic.Pointer[mcp.ClientSession]
	catalog  atomic.Pointer[catalog]
	progress sync.Map // upstream progress token (string) → *progressCall
	tokens   atomic.Uint64
	pid      atomic.Int64 // a local server's process (and group) while it runs

	mu       sync.Mutex
	subs     map[*gateway]struct{}
	lastErr  string
	restarts int
	since    time.Time
}

// upstreamKey is the pool key of a resolved config: its hash, so no
// secret is kept in the key.
func upstreamKey(c *ServerConfig) string {
	raw, _ := json.Marshal(c)
	sum := sha256.Sum256(raw)
	return "mcp-upstream-" + hex.EncodeToString(sum[:])
}

// acquire returns the pooled upstream for a resolved config.
func acquire(logger *zap.Logger, c *ServerConfig) (*upstream, error) {
	return acquireAs(logger, c, nil, false)
}

// acquireAs returns the pooled upstream for a resolved config and, for an
// OAuth server, whose tokens it uses (or, dormant, none: the server's
// entry when each tenant has its own session).
func acquireAs(logger *zap.Logger, c *ServerConfig, tok *tokenEntry, dormant bool) (*upstream, error) {
	key := upstreamKey(c)
	if c.runtime {
		key += "#runtime"
	}
	switch {
	case tok != nil:
		key += "#" + tok.ref.String()
	case dormant:
		key += "#per-tenant"
	}
	v, _, err := upstreams.LoadOrNew(key, func() (caddy.Destructor, error) {
		ctx, cancel := context.WithCancel(context.Background())
		lg := logger.Named("upstream").With(zap.String("server", c.Name))
		if tok != nil && tok.ref.Level != "shared" {
			lg = lg.With(zap.String("tenant", tok.ref.String()))
		}
		u := &upstream{cfg: c, key: key, logger: lg, ctx: ctx, cancel: cancel, subs: map[*gateway]struct{}{}, tok: tok, dormant: dormant}
		u.catalog.Store(&catalog{})
		base := http.RoundTripper(upstreamTransport)
		if c.egress != nil {
			base = pooled(c.egress.Transport())
		}
		switch {
		case tok != nil:
			u.hc = &http.Client{Transport: bearerTransport{e: tok, headers: c.Headers, base: sseTapTransport{base, u}}}
		case c.URL != "":
			u.hc = &http.Client{Transport: headerTransport{headers: c.Headers, base: sseTapTransport{base, u}}}
		}
		if u.hc != nil && c.egress != nil {
			u.hc.CheckRedirect = egress.CheckRedirect
		}
		go u.supervise()
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*upstream), nil
}

func (u *upstream) release() { _, _ = upstreams.Delete(u.key) }

// Destruct closes the server's session and stops its process group,
// whether or not it finished its handshake or minds its stdin closing.
func (u *upstream) Destruct() error {
	u.cancel()
	s := u.session.Load()
	switch {
	case s != nil && u.cfg.Command == "":
		_ = s.Close()
	case s != nil:
		go func() { _ = s.Close() }() // closes stdin; stopGroup waits for the exit
	}
	stopGroup(int(u.pid.Load()), time.Second)
	return nil
}

// supervise connects, waits for the session to end, and reconnects with
// backoff (200ms doubling to 30s; reset after a minute up).
func (u *upstream) supervise() {
	defer func() {
		if p := recover(); p != nil {
			u.logger.Error("mcp upstream supervisor panicked", zap.Any("panic", p), zap.ByteString("stack", debug.Stack()))
		}
	}()
	backoff := 200 * time.Millisecond
	for u.ctx.Err() == nil {
		if !u.waitAuthorised() {
			return
		}
		start := now()
		err := u.runOnce()
		if pid := u.pid.Swap(0); pid > 0 {
			_ = syscall.Kill(-int(pid), syscall.SIGKILL) // what the exited server left behind
		}
		if u.ctx.Err() != nil {
			return
		}
		u.mu.Lock()
		u.restarts++
		if err != nil {
			u.lastErr = err.Error()
		}
		u.mu.Unlock()
		setUp(u.cfg.Name, false)
		if now().Sub(start) > time.Minute {
			backoff = 200 * time.Millisecond
		}
		u.logger.Warn("mcp server down; reconnecting", zap.Error(err), zap.Duration("backoff", backoff))
		select {
		case <-u.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

// waitAuthorised holds an OAuth server's session back until its tenant
// has usable tokens (and a dormant one for good); false when stopping.
func (u *upstream) waitAuthorised() bool {
	if u.dormant {
		u.mu.Lock()
		u.lastErr = "tokens are per tenant: each tenant's calls go through its own session, opened once it is authorised"
		u.mu.Unlock()
		<-u.ctx.Done()
		return false
	}
	for u.tok != nil && !u.tok.usable() {
		ch := u.tok.wait()
		if u.tok.usable() {
			break
		}
		_, err := u.live()
		u.mu.Lock()
		u.lastErr = err.Error()
		u.mu.Unlock()
		if u.tok.ref.Level == "shared" {
			setUp(u.cfg.Name, false)
		}
		select {
		case <-u.ctx.Done():
			return false
		case <-ch:
		}
	}
	return u.ctx.Err() == nil
}

// runOnce holds one session until it ends.
func (u *upstream) runOnce() error {
	client := mcp.NewClient(&mcp.Implementation{Name: "llmgw", Version: "1"}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ProgressNotificationHandler: u.onProgress,
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { go u.refresh() },
		ResourceListChangedHandler:  func(context.Context, *mcp.ResourceListChangedRequest) { go u.refresh() },
		PromptListChangedHandler:    func(context.Context, *mcp.PromptListChangedRequest) { go u.refresh() },
		// a server that stops answering is noticed, and reconnected
		KeepAlive:                 30 * time.Second,
		KeepAliveFailureThreshold: 2,
	})
	tr, err := u.transport()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(u.ctx, time.Duration(u.cfg.Timeout))
	s, err := client.Connect(cctx, tr, nil)
	cancel()
	if err != nil {
		return fmt.Errorf("connecting to mcp server %q: %w", u.cfg.Name, scrub(err))
	}
	u.session.Store(s)
	defer u.session.CompareAndSwap(s, nil)
	if err := u.refresh(); err != nil {
		_ = s.Close()
		return err
	}
	u.mu.Lock()
	u.lastErr, u.since = "", now()
	u.mu.Unlock()
	setUp(u.cfg.Name, true)
	u.logger.Info("mcp server connected", zap.Int("tools", len(u.catalog.Load().tools)))
	err = s.Wait()
	if err == nil {
		err = errors.New("session ended")
	}
	return err
}

// transport builds the client transport; a local server's process is
// started by its Connect.
func (u *upstream) transport() (mcp.Transport, error) {
	c := u.cfg
	if c.Command != "" {
		cmd := exec.Command(c.Command, c.Args...)
		cmd.Dir = c.Dir
		cmd.Env = childEnv(c.Env)
		groupAttr(cmd)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		go u.logStderr(bufio.NewScanner(stderr))
		return tappedTransport{&mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, u, cmd}, nil
	}
	if c.Transport == "sse" {
		return &mcp.SSEClientTransport{Endpoint: c.URL, HTTPClient: u.hc}, nil
	}
	return &mcp.StreamableClientTransport{Endpoint: c.URL, HTTPClient: u.hc}, nil
}

func (u *upstream) logStderr(sc *bufio.Scanner) {
	for sc.Scan() {
		if c := u.logger.Check(zap.InfoLevel, "mcp server stderr"); c != nil {
			line := sc.Text()
			if len(line) > 1000 {
				line = line[:1000]
			}
			c.Write(zap.String("line", line))
		}
	}
}

// childEnv is a minimal environment plus the configured one: llmgw's own
// secrets are not handed to tool servers.
func childEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR", "USER"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// upstreamTransport keeps enough idle connections for many concurrent
// calls to one server (the default keeps 2 per host, and every call over
// that would open a new one).
var upstreamTransport = pooled(http.DefaultTransport.(*http.Transport).Clone())

func pooled(t *http.Transport) *http.Transport {
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 256
	return t
}

// headerTransport adds a remote server's own headers.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// refresh lists what the server offers and tells the gateways.
func (u *upstream) refresh() error {
	s := u.session.Load()
	if s == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(u.ctx, time.Duration(u.cfg.Timeout))
	defer cancel()
	var c catalog
	caps := s.InitializeResult().Capabilities
	if caps != nil && caps.Tools != nil {
		for t, err := range s.Tools(ctx, nil) {
			if err != nil {
				return fmt.Errorf("listing the tools of mcp server %q: %w", u.cfg.Name, err)
			}
			c.tools = append(c.tools, t)
		}
	}
	if caps != nil && caps.Resources != nil {
		for r, err := range s.Resources(ctx, nil) {
			if err != nil {
				return fmt.Errorf("listing the resources of mcp server %q: %w", u.cfg.Name, err)
			}
			c.resources = append(c.resources, r)
		}
	}
	if caps != nil && caps.Prompts != nil {
		for p, err := range s.Prompts(ctx, nil) {
			if err != nil {
				return fmt.Errorf("listing the prompts of mcp server %q: %w", u.cfg.Name, err)
			}
			c.prompts = append(c.prompts, p)
		}
	}
	u.catalog.Store(&c)
	u.mu.Lock()
	subs := make([]*gateway, 0, len(u.subs))
	for g := range u.subs {
		subs = append(subs, g)
	}
	u.mu.Unlock()
	for _, g := range subs {
		g.sync(u.cfg.Name)
	}
	return nil
}

func (u *upstream) subscribe(g *gateway, on bool) {
	u.mu.Lock()
	if on {
		u.subs[g] = struct{}{}
	} else {
		delete(u.subs, g)
	}
	u.mu.Unlock()
}

func (u *upstream) onProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	tok, _ := req.Params.ProgressToken.(string)
	if pc, ok := u.progress.Load(tok); ok {
		pc := pc.(*progressCall)
		pc.forward(req.Params)
		pc.handled.Add(1)
	}
}

// errDown is returned for calls to a server that is not connected.
type errDown struct {
	server, reason string
}

func (e errDown) Error() string {
	if e.reason == "" {
		return fmt.Sprintf("mcp server %q is not connected; llmgw is (re)connecting to it, retry shortly", e.server)
	}
	return fmt.Sprintf("mcp server %q is not connected (%s); llmgw is (re)connecting to it, retry shortly", e.server, e.reason)
}

// live returns the current session or a clear error.
func (u *upstream) live() (*mcp.ClientSession, error) {
	if u.tok != nil && !u.tok.usable() {
		reason := ""
		if rec := u.tok.record(); rec != nil {
			reason = rec.LastError
		}
		return nil, &needsAuthError{server: u.cfg.Name, ref: u.tok.ref, reason: reason}
	}
	if s := u.session.Load(); s != nil {
		return s, nil
	}
	u.mu.Lock()
	reason := u.lastErr
	u.mu.Unlock()
	return nil, errDown{u.cfg.Name, reason}
}

// callTool calls a tool with the server's timeout; progress, when not
// nil, receives the server's progress notifications for this call.
func (u *upstream) callTool(ctx context.Context, name string, args json.RawMessage, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	s, err := u.live()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(u.cfg.Timeout))
	defer cancel()
	p := &mcp.CallToolParams{Name: name}
	if len(args) > 0 {
		p.Arguments = args
	}
	if progress != nil {
		tok := "llmgw-" + strconv.FormatUint(u.tokens.Add(1), 36)
		pc := &progressCall{forward: progress}
		u.progress.Store(tok, pc)
		defer u.progress.Delete(tok)
		defer pc.drain(ctx)
		p.SetProgressToken(tok)
	}
	res, err := s.CallTool(ctx, p)
	if errors.Is(err, mcp.ErrSessionMissing) {
		_ = s.Close() // the server forgot the session (it restarted): reconnect
	}
	return res, u.wrap(ctx, "tools/call "+name, err)
}

// wrap turns a call's failure into an error that says what happened.
func (u *upstream) wrap(ctx context.Context, what string, err error) error {
	err = scrub(err)
	switch {
	case err == nil:
		return nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("mcp server %q did not answer %s within %s (its timeout)", u.cfg.Name, what, time.Duration(u.cfg.Timeout))
	case errors.Is(err, mcp.ErrConnectionClosed) || u.session.Load() == nil:
		return fmt.Errorf("mcp server %q went away during %s; llmgw is reconnecting to it, retry shortly: %w", u.cfg.Name, what, err)
	}
	return fmt.Errorf("mcp server %q: %s: %w", u.cfg.Name, what, err)
}

// status is what the admin API shows of an upstream: never its headers
// or environment values.
func (u *upstream) status() (up bool, lastErr string, restarts int, since time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.session.Load() != nil, u.lastErr, u.restarts, u.since
}

// Interface guards
var _ caddy.Destructor = (*upstream)(nil)

// scrub drops the URL from an HTTP client's error: it may hold a
// credential.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
