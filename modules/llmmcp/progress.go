package llmmcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"os/exec"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A call's progress notifications reach the client before its result.
//
// The SDK answers a call the moment its response is read, but hands the
// notifications read before it to a handler queue of their own, so the
// result can overtake them; once the gateway has answered its own client,
// a late notification has nowhere to go. So each upstream connection is
// tapped where its messages are read, in wire order: the tap counts a
// call's progress notifications as they arrive, and the call waits until
// the handler has forwarded as many as were read before its result.

// progressCall forwards one upstream call's progress notifications.
type progressCall struct {
	forward func(*mcp.ProgressNotificationParams)
	read    atomic.Int64 // notifications for the call read off the connection
	handled atomic.Int64 // … and handed to forward
}

// progressDrainLimit bounds the wait for notifications already read: the
// handler queue runs them in microseconds, so this is reached only when
// forwarding itself is stuck (a client not reading its stream).
const progressDrainLimit = 2 * time.Second

// drain waits until every notification read so far has been forwarded.
func (pc *progressCall) drain(ctx context.Context) {
	if pc.handled.Load() >= pc.read.Load() {
		return
	}
	deadline := time.Now().Add(progressDrainLimit)
	for pc.handled.Load() < pc.read.Load() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(100 * time.Microsecond)
	}
}

// noteRead counts a progress notification read off the connection, given
// its params; one for no call of ours is ignored.
func (u *upstream) noteRead(params json.RawMessage) {
	var p struct {
		Token any `json:"progressToken"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	if tok, ok := p.Token.(string); ok {
		if pc, ok := u.progress.Load(tok); ok {
			pc.(*progressCall).read.Add(1)
		}
	}
}

// progressMethod is the notification's method, as it appears on the wire.
const progressMethod = "notifications/progress"

// tappedTransport taps a stdio server's connection (its messages come
// whole from the SDK's line reader).
type tappedTransport struct {
	mcp.Transport
	u   *upstream
	cmd *exec.Cmd // the local server's, whose process the upstream stops
}

func (t tappedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if t.cmd != nil && t.cmd.Process != nil {
		// started: from now on stopping the upstream stops it, handshake or not
		t.u.pid.Store(int64(t.cmd.Process.Pid))
	}
	if err != nil {
		return nil, err
	}
	return tappedConn{c, t.u}, nil
}

type tappedConn struct {
	mcp.Connection
	u *upstream
}

func (c tappedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == progressMethod {
		c.u.noteRead(r.Params)
	}
	return m, err
}

// sseTapTransport taps the event streams of a url server (Streamable
// HTTP or SSE): the SDK's own connection for Streamable HTTP carries
// session state through unexported methods, so it cannot be wrapped, and
// the tap reads the bytes instead, as the SDK reads them.
type sseTapTransport struct {
	base http.RoundTripper
	u    *upstream
}

func (t sseTapTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.Body != nil {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
			resp.Body = &sseTap{ReadCloser: resp.Body, u: t.u}
		}
	}
	return resp, err
}

// maxTappedEvent bounds what the tap keeps of one event's data: progress
// notifications are small, and a larger event is passed by uncounted.
const maxTappedEvent = 64 << 10

// sseTap reads server-sent events as they pass, counting the progress
// notifications among them. An event is counted when its closing blank
// line passes the tap, before the SDK, reading after the tap, sees it.
type sseTap struct {
	io.ReadCloser
	u        *upstream
	line     []byte // the current line, up to its newline
	data     []byte // the current event's data lines
	longLine bool   // the current line is too long to be kept
	overflow bool   // the current event is too large to be counted
}

func (s *sseTap) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	s.scan(p[:n])
	return n, err
}

func (s *sseTap) scan(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			s.keep(b)
			return
		}
		s.keep(b[:i])
		s.endLine()
		b = b[i+1:]
	}
}

func (s *sseTap) keep(b []byte) {
	if s.longLine {
		return
	}
	if len(s.line)+len(b) > maxTappedEvent {
		s.longLine = true
		s.line = s.line[:0]
		return
	}
	s.line = append(s.line, b...)
}

// endLine handles one whole line of the stream (a lone CR ends no line
// here; the SDK's streams end lines with LF).
func (s *sseTap) endLine() {
	line := bytes.TrimSuffix(s.line, []byte{'\r'})
	s.line = s.line[:0]
	if s.longLine {
		s.longLine, s.overflow = false, true
		return
	}
	switch {
	case len(line) == 0: // the event ends
		if !s.overflow && bytes.Contains(s.data, []byte(progressMethod)) {
			var m struct {
				Method string          `json:"method"`
				Params json.RawMessage `json:"params"`
			}
			if json.Unmarshal(s.data, &m) == nil && m.Method == progressMethod {
				s.u.noteRead(m.Params)
			}
		}
		s.data, s.overflow = s.data[:0], false
	case s.overflow:
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[5:], []byte{' '})
		if len(s.data)+len(v)+1 > maxTappedEvent {
			s.overflow = true
			return
		}
		if len(s.data) > 0 {
			s.data = append(s.data, '\n')
		}
		s.data = append(s.data, v...)
	}
}
