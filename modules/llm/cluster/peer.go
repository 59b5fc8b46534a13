package cluster

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/openai"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// minPeerSecret is the shortest cluster secret accepted, in bytes.
const minPeerSecret = 32

// peerPrefix starts the path of a request for a replica on the node that
// receives it: /replica/<path-escaped replica id>/<rest of the engine path>.
const peerPrefix = "/replica/"

// The CA every node derives from the cluster secret: its key from HKDF,
// its certificate from a fixed template, so all nodes hold the
// byte-identical CA without exchanging anything.
var (
	peerCANotBefore = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	peerCANotAfter  = time.Date(2125, 1, 1, 0, 0, 0, 0, time.UTC)
)

const (
	peerCASalt = "llmgw cluster"
	peerCAInfo = "llmgw cluster CA ed25519 v1"
)

// peerCA derives the cluster CA from secret.
func peerCA(secret string) (*x509.Certificate, ed25519.PrivateKey, error) {
	if len(secret) < minPeerSecret {
		return nil, nil, fmt.Errorf("cluster secret is %d bytes long; it must be at least %d (for example the output of `openssl rand -base64 48`), the same on every node", len(secret), minPeerSecret)
	}
	seed, err := hkdf.Key(sha256.New, []byte(secret), []byte(peerCASalt), peerCAInfo, ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("deriving the cluster CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public().(ed25519.PublicKey)
	ski := sha256.Sum256(pub)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "llmgw cluster CA"},
		NotBefore:             peerCANotBefore,
		NotAfter:              peerCANotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
		SubjectKeyId:          ski[:20],
	}
	// Ed25519 signatures are deterministic: the same secret gives the
	// same certificate bytes on every node.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, nil, fmt.Errorf("making the cluster CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cluster CA certificate: %w", err)
	}
	return ca, key, nil
}

// newPeerTLS gives a node's TLS configurations for the node-to-node hop:
// server requires a client certificate from the cluster CA, client trusts
// only that CA and presents the node's certificate. The node's key is
// fresh; its certificate, signed by the CA, names advertiseHost (an IP
// address or DNS name, with or without a port) and nodeName.
func newPeerTLS(secret, nodeName, advertiseHost string) (server, client *tls.Config, err error) {
	ca, caKey, err := peerCA(secret)
	if err != nil {
		return nil, nil, err
	}
	if nodeName == "" {
		return nil, nil, fmt.Errorf("node name is empty; every node of a cluster needs its own name")
	}
	cert, err := peerNodeCert(ca, caKey, nodeName, advertiseHost)
	if err != nil {
		return nil, nil, fmt.Errorf("making the certificate of node %q: %w", nodeName, err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
	}
	return server, client, nil
}

func peerNodeCert(ca *x509.Certificate, caKey ed25519.PrivateKey, nodeName, host string) (tls.Certificate, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: nodeName},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     peerCANotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{nodeName},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else if host != "" && host != nodeName {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// peerKeepAlive probes an idle node-to-node connection after 15s and
// gives up after three probes 5s apart unanswered: a node that vanished
// without closing its connections (power loss, a cut network) ends the
// requests in flight to or from it within about half a minute.
var peerKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// newPeerTransport reaches other nodes' peer endpoints: kept-alive
// HTTP/1.1 connections, as many as requests in flight, no proxy from the
// environment, TCP keep-alive probes to notice a peer that vanished. A
// failed TLS handshake is logged at warn: it means the nodes' cluster
// secrets differ (or something else answers at the peer's address).
// client is not changed.
func newPeerTransport(client *tls.Config, logger *zap.Logger) *http.Transport {
	var h1 http.Protocols
	h1.SetHTTP1(true)
	tc := client.Clone()
	tc.NextProtos = []string{"http/1.1"}
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAliveConfig: peerKeepAlive}
	return &http.Transport{
		DialContext:         dialer.DialContext,
		DialTLSContext:      peerDialTLS(dialer, tc, logger),
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 5 * time.Second,
		Protocols:           &h1,
		MaxIdleConnsPerHost: 256,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      16 << 10,
	}
}

// peerDialTLS connects to another node's peer endpoint and shakes hands,
// logging a failed handshake at warn with what to check.
func peerDialTLS(dialer *net.Dialer, conf *tls.Config, logger *zap.Logger) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := conf.Clone()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			c.ServerName = host
		}
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		conn := tls.Client(raw, c)
		if err := conn.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			if ctx.Err() == nil {
				logger.Warn("TLS handshake with another node failed: its cluster secret may differ from this node's; give every node the same cluster secret",
					zap.String("peer", addr), zap.Error(err))
			}
			return nil, fmt.Errorf("TLS handshake with node at %s: %w", addr, err)
		}
		return conn, nil
	}
}

// peerErrorLog is the peer endpoint's http.Server error log: a TLS
// handshake that failed on a certificate (a node with another cluster
// secret, or no certificate at all) is logged at warn, other errors
// (a port probe that closed at once) at debug.
type peerErrorLog struct{ logger *zap.Logger }

func (l peerErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if strings.Contains(msg, "TLS handshake error") && (strings.Contains(msg, "certificate") || strings.Contains(msg, "tls: ")) {
		l.logger.Warn("TLS handshake from another node failed: its cluster secret may differ from this node's; give every node the same cluster secret",
			zap.String("error", msg))
	} else if c := l.logger.Check(zapcore.DebugLevel, "peer endpoint"); c != nil {
		c.Write(zap.String("error", msg))
	}
	return len(p), nil
}

// peerURL is the base URL through which other nodes reach replica id on
// the node whose peer endpoint listens at hostport; the router appends
// "/" + the engine path, as it does to a local replica's BaseURL.
func peerURL(hostport, id string) string {
	return "https://" + hostport + peerPrefix + url.PathEscape(id)
}

// peers holds the peer servers, keyed by peerKey, so a config reload that
// keeps the listen address, the secret and the node keeps the listener and
// the streams in flight.
var peers = caddy.NewUsagePool()

// peerKey is the pool key of a peer server; it holds a hash of the
// secret, never the secret.
func peerKey(listen, secret, nodeName, advertiseHost string) string {
	sum := sha256.Sum256([]byte(secret))
	return "peer:" + listen + ":" + hex.EncodeToString(sum[:8]) + ":" + nodeName + ":" + advertiseHost
}

// PeerLookup finds a local replica by id and counts a request in flight on
// it; release ends that request.
type PeerLookup func(id string) (rep *fleet.Replica, release func(), ok bool)

// peerServer is a node's peer endpoint. It serves
//
//	POST|GET /replica/<replica id>/<rest>  forwarded to the replica's BaseURL + "/" + rest
//	GET /health                            200 "ok"
//	GET /weights, POST /weights/prune      the node's weights directory, for the admin API
//
// and never forwards to another node.
type peerServer struct {
	node   string
	ln     net.Listener
	srv    *http.Server
	engine *http.Transport
	lookup atomic.Pointer[PeerLookup]
	local  atomic.Pointer[http.Handler] // the app's own node-to-node routes (setLocal)
	logger *zap.Logger
	done   chan struct{}
}

// startPeer listens on listen (host:port) with tlsConf and serves the peer
// endpoint in the background until Destruct.
func startPeer(listen string, tlsConf *tls.Config, nodeName string, lookup PeerLookup, logger *zap.Logger) (*peerServer, error) {
	na, err := caddy.ParseNetworkAddressWithDefaults(listen, "tcp", 0)
	if err != nil {
		return nil, fmt.Errorf("cluster listen address %q: %w", listen, err)
	}
	lnAny, err := na.Listen(context.Background(), 0, net.ListenConfig{KeepAliveConfig: peerKeepAlive})
	if err != nil {
		return nil, fmt.Errorf("listening for other nodes on %s: %w", listen, err)
	}
	ln, ok := lnAny.(net.Listener)
	if !ok {
		_ = closeAny(lnAny)
		return nil, fmt.Errorf("listening for other nodes on %s: not a stream address", listen)
	}
	p := &peerServer{node: nodeName, ln: ln, logger: logger, done: make(chan struct{})}
	p.lookup.Store(&lookup)
	p.engine = EngineTransport(5*time.Second, 512)
	errLog := log.New(peerErrorLog{logger}, "", 0) // failed handshakes
	p.srv = &http.Server{
		Handler:           p,
		TLSConfig:         tlsConf,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          errLog,
		// For nodes that still speak HTTP/2: pings notice a sending node
		// that vanished, so its requests end and leave the replica's count.
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 1000, SendPingTimeout: 15 * time.Second, PingTimeout: 5 * time.Second},
	}
	go func() {
		defer close(p.done)
		err := p.srv.ServeTLS(ln, "", "")
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("peer endpoint stopped", zap.String("listen", listen), zap.Error(err))
		}
	}()
	logger.Info("peer endpoint listening", zap.String("listen", ln.Addr().String()), zap.String("node", nodeName))
	return p, nil
}

func closeAny(v any) error {
	if c, ok := v.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Addr is the address the peer endpoint listens on.
func (p *peerServer) Addr() net.Addr { return p.ln.Addr() }

// setLookup makes later requests find replicas with lookup: a config
// that kept this server from the previous one gives its own.
func (p *peerServer) setLookup(lookup PeerLookup) { p.lookup.Store(&lookup) }

// peerShutdownGrace is how long Destruct lets requests in flight finish.
const peerShutdownGrace = 10 * time.Second

// Destruct stops listening, lets requests in flight finish for a while,
// then closes what is left.
func (p *peerServer) Destruct() error {
	ctx, cancel := context.WithTimeout(context.Background(), peerShutdownGrace)
	defer cancel()
	err := p.srv.Shutdown(ctx)
	if err != nil {
		err = p.srv.Close()
	}
	<-p.done
	p.engine.CloseIdleConnections()
	return err
}

func (p *peerServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	if path == "/health" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
		return
	}
	if path == "/weights" || path == "/weights/prune" {
		p.serveLocal(w, r)
		return
	}
	if path == "/models/roll" || path == "/models/retry" || path == UpgradePath { // updates_cluster.go, admin_retry.go, node_upgrade.go
		p.serveLocal(w, r)
		return
	}
	if !strings.HasPrefix(path, peerPrefix) {
		(&openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "unknown_endpoint",
			Message: "unknown peer endpoint " + r.URL.Path + "; nodes serve /replica/<id>/<path> and /health"}).Write(w)
		return
	}
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET, POST")
		(&openai.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: "the peer endpoint accepts GET and POST only"}).Write(w)
		return
	}
	escID, rest, _ := strings.Cut(path[len(peerPrefix):], "/")
	id, err := url.PathUnescape(escID)
	if err != nil || id == "" {
		p.replicaGone(w, escID)
		return
	}
	rep, release, ok := (*p.lookup.Load())(id)
	// A replica with a Transport runs elsewhere: the hop never goes on to
	// a third node.
	if !ok || rep.Transport != nil {
		if ok {
			release()
		}
		p.replicaGone(w, id)
		return
	}
	defer release()
	p.forward(w, r, rep, rest)
}

// forward sends r to rep's engine server at rest (escaped) under its
// BaseURL and copies the answer back as it comes: an event stream is
// flushed after every read, a whole answer leaves in one piece.
func (p *peerServer) forward(w http.ResponseWriter, r *http.Request, rep *fleet.Replica, rest string) {
	target := fleet.UpstreamURL(rep.BaseURL, rest)
	if r.URL.RawQuery != "" {
		sep := "?"
		if strings.IndexByte(target, '?') >= 0 {
			sep = "&"
		}
		target += sep + r.URL.RawQuery
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, target, nil)
	if err != nil {
		(&openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_path",
			Message: fmt.Sprintf("the path after replica %s is not a valid URL path: %v", rep.ID, err)}).Write(w)
		return
	}
	if r.ContentLength != 0 {
		out.Body, out.ContentLength = r.Body, r.ContentLength
	}
	out.Header = make(http.Header, len(r.Header)+len(rep.Header))
	copyEndToEnd(out.Header, r.Header)
	rep.SetHeaders(out.Header)
	// The engine transport reads r.Body until it has sent it, which may
	// be after the engine's answer began. An HTTP/1 server that sends
	// the status of a handler that is not full duplex first reads what
	// is left of the request body and closes it; the transport then
	// fails on the closed body and drops the engine connection, answer
	// and all. (HTTP/2 is always full duplex.)
	rc := http.NewResponseController(w)
	_ = rc.EnableFullDuplex()
	resp, err := p.engine.RoundTrip(out)
	if err != nil {
		p.engineError(w, r, rep.ID, err)
		return
	}
	defer resp.Body.Close()
	copyEndToEnd(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	stream := resp.ContentLength < 0
	if stream {
		// The sending node learns now that the engine answered, however
		// long the first token takes.
		_ = rc.Flush()
	}
	if err := copyAnswer(w, resp.Body, stream); err != nil {
		if r.Context().Err() != nil {
			// The sending node gave up: nobody reads the rest.
			if c := p.logger.Check(zapcore.DebugLevel, "peer request canceled"); c != nil {
				c.Write(zap.String("replica", rep.ID), zap.Error(err))
			}
			return
		}
		p.logger.Warn("answer of a replica broke off on its way to another node", zap.String("replica", rep.ID), zap.Error(err))
		// The status is sent: ending the handler normally would end the
		// answer as if it were whole. Aborting breaks the connection (or
		// resets the HTTP/2 stream), so the sending node sees the break
		// and tells its client.
		panic(http.ErrAbortHandler)
	}
}

// hopHeaders belong to one connection and are not forwarded.
var hopHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
}

// copyEndToEnd copies src's headers into dst but for hop-by-hop ones and
// those src's Connection header names.
func copyEndToEnd(dst, src http.Header) {
	named := src["Connection"]
	for k, v := range src {
		if hopHeaders[k] || (named != nil && connectionNames(named, k)) {
			continue
		}
		dst[k] = v
	}
}

func connectionNames(conn []string, k string) bool {
	for _, v := range conn {
		for _, f := range strings.Split(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(f)) == k {
				return true
			}
		}
	}
	return false
}

// copyAnswer copies body to w, flushing after every read when stream.
// Its error is the first of reading body or writing w.
func copyAnswer(w http.ResponseWriter, body io.Reader, stream bool) error {
	bp := peerBufPool.Get().(*[]byte)
	defer peerBufPool.Put(bp)
	buf := *bp
	flusher, _ := w.(http.Flusher)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, err := w.Write(buf[:n]); err != nil {
				return err
			}
			if stream && flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// PeerErrorHeader marks an answer of the node-to-node endpoint that came
// from the endpoint itself, not from the engine: the replica is gone or
// did not answer, and the sending router retries another replica.
const PeerErrorHeader = "Llmgw-Peer-Error"

func (p *peerServer) replicaGone(w http.ResponseWriter, id string) {
	w.Header().Set(PeerErrorHeader, "replica_gone")
	(&openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "replica_gone",
		Message: fmt.Sprintf("replica %s is not on node %s: it stopped or moved; the request can be retried on another replica", id, p.node)}).Write(w)
}

func (p *peerServer) unreachable(w http.ResponseWriter, id string, err error) {
	w.Header().Set(PeerErrorHeader, "replica_unreachable")
	(&openai.Error{Status: http.StatusBadGateway, Type: "server_error", Code: "replica_unreachable",
		Message: fmt.Sprintf("replica %s on node %s did not answer: %v; the request can be retried on another replica", id, p.node, err)}).Write(w)
}

// engineError answers a request the engine server could not take.
func (p *peerServer) engineError(w http.ResponseWriter, r *http.Request, id string, err error) {
	if r.Context().Err() != nil {
		// The sending node gave up (its client left or it timed out):
		// nobody reads the answer.
		if c := p.logger.Check(zapcore.DebugLevel, "peer request canceled"); c != nil {
			c.Write(zap.String("replica", id), zap.Error(err))
		}
		return
	}
	p.logger.Warn("replica unreachable through the peer endpoint", zap.String("replica", id), zap.Error(err))
	p.unreachable(w, id, err)
}

// peerBufPool recycles the copy buffers.
var peerBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// EngineTransport is how llmgw reaches engine servers and outside
// providers: kept-alive connections (idle per host), no compression, 16
// KiB buffers, the environment's proxy (outside providers may need it;
// loopback never uses it). The router and the node-to-node endpoint
// both use it.
func EngineTransport(dial time.Duration, idle int) *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: dial, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: idle,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
		WriteBufferSize:     16 << 10,
		ReadBufferSize:      16 << 10,
	}
}

// setLocal makes later requests to the app's own routes (/weights,
// /weights/prune, /models/roll) go to h: the running config's app.
func (p *peerServer) setLocal(h http.Handler) { p.local.Store(&h) }

func (p *peerServer) serveLocal(w http.ResponseWriter, r *http.Request) {
	h := p.local.Load()
	if h == nil {
		http.Error(w, "the llm app is not running", http.StatusServiceUnavailable)
		return
	}
	(*h).ServeHTTP(w, r)
}
