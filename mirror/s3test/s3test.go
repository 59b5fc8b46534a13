// Package s3test starts real S3 servers (versitygw over a directory) on
// loopback for tests. It is not part of the llmgw binary.
package s3test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Version is the versitygw release .ci/install builds.
const Version = "v1.8.0"

// Missing says how to get versitygw when Bin finds none.
const Missing = "versitygw is not installed; .ci/install builds it (go install github.com/versity/versitygw/cmd/versitygw@" + Version + " into ~/.cache/llmgw/versitygw-" + Version + ")"

// Credentials the servers accept.
const (
	AccessKey = "llmgw-test-access"
	SecretKey = "llmgw-test-secret-key"
)

// Bin finds versitygw: $LLMGW_VERSITYGW, the cache .ci/install fills, PATH.
func Bin() string {
	if p := os.Getenv("LLMGW_VERSITYGW"); p != "" {
		return p
	}
	if cache, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(cache, "llmgw", "versitygw-"+Version, "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	return ""
}

// Server is one versitygw process serving a directory.
type Server struct {
	t    testing.TB
	bin  string
	Port int
	// Dir holds the buckets: Dir/<bucket>/<key> is an object's bytes.
	Dir string
	cmd *exec.Cmd
}

// Start starts a server on a free loopback port; it stops with the test.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin()
	if bin == "" {
		t.Fatal(Missing)
	}
	s := &Server{t: t, bin: bin, Dir: t.TempDir(), Port: freePort(t)}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Endpoint is host:port.
func (s *Server) Endpoint() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// ObjectPath is where the server keeps an object's bytes on disk.
func (s *Server) ObjectPath(bucket, key string) string {
	return filepath.Join(s.Dir, bucket, filepath.FromSlash(key))
}

// Kill stops the server at once, as a crash would.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart starts the server again on the same port and directory.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	vdir := s.Dir + ".versions"
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	s.cmd = exec.Command(s.bin, Args(s.Endpoint(), s.Dir)...)
	s.cmd.Stderr = os.Stderr
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", s.Endpoint())
		if err == nil {
			c.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("versitygw did not listen on %s", s.Endpoint())
}

// Args is versitygw's command line for a quiet server on addr over dir
// (whose versions go to dir.versions, which must exist), keeping
// connections alive as S3 services do.
func Args(addr, dir string) []string {
	return []string{"--access", AccessKey, "--secret", SecretKey, "--port", addr, "--quiet", "--keep-alive",
		"posix", "--versioning-dir", dir + ".versions", dir}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
