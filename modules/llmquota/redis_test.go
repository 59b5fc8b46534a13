package llmquota

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm"
)

// redisAt runs a real redis-server on a free loopback port until stopped.
type redisAt struct {
	t    *testing.T
	port int
	cmd  *exec.Cmd
}

func startRedisServer(t *testing.T, port int) *redisAt {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; .ci/install installs it (apt-get install redis-server)")
	}
	if port == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	r := &redisAt{t: t, port: port}
	r.cmd = exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", fmt.Sprint("127.0.0.1:", port))
		if err == nil {
			c.Close()
			return r
		}
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not listen")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *redisAt) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Kill()
		_ = r.cmd.Wait()
		r.cmd = nil
	}
}

// Settlements are queued, ride along with the next admission, survive an
// outage of Redis and are applied once.
func TestRedisSettlementsQueueAndApplyOnce(t *testing.T) {
	r := startRedisServer(t, 0)
	s, err := newRedisStore(fmt.Sprintf("redis://127.0.0.1:%d", r.port))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	ctx := context.Background()
	lvl := llm.Level{Kind: "key", Name: "k-redis", Limits: llm.Limits{TokensPerMinute: 1000}}
	a := testAdmission(400, lvl)
	if d, err := s.admit(ctx, a); err != nil || !d.ok {
		t.Fatalf("first admission: %v %+v", err, d)
	}
	// The reservation of 400 becomes 10 used: the next admission (in the
	// same round trip) sees 10, and one of 990 fits exactly.
	if err := s.settle(ctx, &settlement{adm: a, prompt: 4, completion: 6}); err != nil {
		t.Fatal(err)
	}
	if d, err := s.admit(ctx, testAdmission(990, lvl)); err != nil || !d.ok {
		t.Fatalf("admission after the settlement: %v %+v", err, d)
	}

	// Redis goes away: the settlement waits in the queue.
	r.stop()
	b := testAdmission(5, llm.Level{Kind: "key", Name: "k-outage", Limits: llm.Limits{RequestsPerMinute: 100}})
	b.model = "m"
	if err := s.settle(ctx, &settlement{adm: b, prompt: 2, completion: 3}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if s.pending() != 1 {
		t.Fatalf("%d settlements queued during the outage, want 1", s.pending())
	}
	// It returns (empty, as a restarted Redis without persistence is): the
	// settlement is sent, its usage recorded once even if sent twice.
	startRedisServer(t, r.port)
	deadline := time.Now().Add(10 * time.Second)
	for s.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if s.pending() != 0 {
		t.Fatal("the queued settlement was not sent after Redis returned")
	}
	if _, err := s.run(ctx, []*settlement{{adm: b, prompt: 2, completion: 3}}, nil); err != nil {
		t.Fatal(err)
	}
	u, err := s.ReadUsage(b.levels[0].level.Node(), b.now.Add(-time.Hour), b.now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got := u["m"]; got == nil || got.Requests != 1 || got.InputTokens != 2 || got.OutputTokens != 3 {
		t.Fatalf("usage after the outage: %+v", got)
	}
}
