// Package pgtest runs a real PostgreSQL server for tests: its own data
// directory in a temporary directory, on a free loopback port, with its
// socket in that directory, never the system's server. Debian's
// postgresql-15 package (.ci/install) provides the binaries; as root,
// the server runs as the package's postgres user, since PostgreSQL
// refuses to run as root.
package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Password is the password of the superuser "postgres" over TCP (local
// socket connections need none): the dsn Start returns carries it, so
// that tests can check it is never shown.
const Password = "pgtest-secret-4b1d"

// server is one running PostgreSQL.
type server struct {
	t      testing.TB
	bin    string
	dir    string
	port   int
	cred   *syscall.Credential
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start runs a PostgreSQL server until the test ends and returns the
// dsn of its database "postgres", a stop that shuts it down (fast
// shutdown, as pg_ctl stop -m fast) and a restart that stops it if it
// runs and starts it again on the same port and data. It skips the test
// when PostgreSQL is not installed, and fails it when CI is set.
func Start(t testing.TB) (dsn string, stop, restart func()) {
	t.Helper()
	s := &server{t: t, bin: binDir(t)}
	s.prepare()
	s.start()
	t.Cleanup(func() {
		s.stop()
		os.RemoveAll(s.dir)
	})
	u := url.URL{Scheme: "postgres", User: url.UserPassword("postgres", Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/postgres", RawQuery: "sslmode=disable"}
	return u.String(), s.stop, func() { s.stop(); s.start() }
}

// binDir finds the directory of initdb and postgres.
func binDir(t testing.TB) string {
	t.Helper()
	for _, v := range []string{"17", "16", "15"} {
		dir := filepath.Join("/usr/lib/postgresql", v, "bin")
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	msg := "PostgreSQL is not installed (no initdb in /usr/lib/postgresql/*/bin or on PATH); .ci/install installs it (apt-get install postgresql-15)"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// prepare makes the directory, owned by the user the server runs as,
// and runs initdb in it.
func (s *server) prepare() {
	t := s.t
	t.Helper()
	dir, err := os.MkdirTemp("", "llmgw-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	if os.Geteuid() == 0 {
		s.cred = postgresUser(t)
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(Password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.port = freePort(t)
	out, err := s.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
}

// postgresUser is the credential of the postgres user, for running as
// root.
func postgresUser(t testing.TB) *syscall.Credential {
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("running as root, PostgreSQL needs a user of its own, and there is no postgres user (%v); the postgresql-15 package creates it (apt-get install postgresql-15)", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
}

// command is a command of PostgreSQL's, run as the server's user.
func (s *server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd
}

// freePort picks a loopback port no other test holds: it claims the
// port as the end-to-end tests' harness does (cmd/llmgw/harness_test.go,
// a lock on a file per port in $TMPDIR/llmgw-test-ports, held until the
// test ends), so that tests running side by side in other processes are
// never handed it.
func freePort(t testing.TB) int {
	t.Helper()
	start := mrand.IntN(portHigh - portLow)
	for i := range portHigh - portLow {
		p := portLow + (start+i)%(portHigh-portLow)
		if !claimPort(t, p) {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatalf("no free port in %d-%d", portLow, portHigh)
	return 0
}

// The ports freePort hands out, as the harness's: below Linux's
// ephemeral range and above the ports services listen on by default.
const portLow, portHigh = 20000, 32000

// claimPort takes port p for the rest of the test (see freePort); the
// lock files stay. Without the directory it claims every port.
func claimPort(t testing.TB, p int) bool {
	dir := filepath.Join(os.TempDir(), "llmgw-test-ports")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(p)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return false
	}
	t.Cleanup(func() { f.Close() })
	return true
}

// start runs the server and waits until it accepts connections.
func (s *server) start() {
	t := s.t
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	logf, err := os.OpenFile(filepath.Join(s.dir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := s.command("postgres", "-D", filepath.Join(s.dir, "data"), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=300")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting postgres: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(s.dir, "server.log"))
			t.Fatalf("postgres exited while starting:\n%s", log)
		default:
		}
		if s.ready() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("postgres did not accept connections on 127.0.0.1:%d within a minute", s.port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready reports whether the server accepts a connection.
func (s *server) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", s.dir, s.port))
	if err != nil {
		return false
	}
	conn.Close(ctx)
	return true
}

// stop shuts the server down (SIGINT: a fast shutdown) if it runs.
func (s *server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// Database creates an empty database on the server of dsn and returns
// its dsn: one per test, on one server.
func Database(t testing.TB, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connecting to create a database: %v", err)
	}
	defer conn.Close(ctx)
	name := "t_" + strings.ToLower(rand.Text()[:12])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("creating database %s: %v", name, err)
	}
	u.Path = "/" + name
	return u.String()
}
