package llmquota

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// redisAt runs a real redis-server on a free loopback port until stopped.
type redisAt struct {
	t    testing.TB
	port int
	cmd  *exec.Cmd
}

func startRedisServer(t testing.TB, port int) *redisAt {
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

// startRedisStore runs a redis-server and a store counting in it, both
// stopped when the test ends.
func startRedisStore(t testing.TB) (*redisAt, *redisStore) {
	t.Helper()
	r := startRedisServer(t, 0)
	s, err := newRedisStore(fmt.Sprintf("redis://127.0.0.1:%d", r.port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Destruct() })
	return r, s
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
	r, s := startRedisStore(t)
	ctx := context.Background()
	lvl := tenancy.Level{Kind: "key", Name: "k-redis", Limits: tenancy.Limits{TokensPerMinute: 1000}}
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
	b := testAdmission(5, tenancy.Level{Kind: "key", Name: "k-outage", Limits: tenancy.Limits{RequestsPerMinute: 100}})
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
	if err := s.run(ctx, []*settlement{{adm: b, prompt: 2, completion: 3}}, nil); err != nil {
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

// Concurrent admissions share pipelines: 64 at once against a limit of
// 50 admit exactly 50 in fewer round trips than requests, and Redis
// losing its scripts (a restart, SCRIPT FLUSH) costs one reload.
func TestRedisAdmissionsShareRoundTrips(t *testing.T) {
	_, s := startRedisStore(t)
	ctx := context.Background()
	lvl := tenancy.Level{Kind: "key", Name: "k-batch", Limits: tenancy.Limits{RequestsPerMinute: 50}}
	if _, err := s.admit(ctx, testAdmission(1, tenancy.Level{Kind: "key", Name: "k-warm"})); err != nil {
		t.Fatal(err) // connects and loads the scripts
	}
	reads := func() int64 {
		info, err := s.client.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "total_reads_processed:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatal("no total_reads_processed in INFO stats")
		return 0
	}
	before := reads()
	start := make(chan struct{})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			<-start
			d, err := s.admit(ctx, testAdmission(1, lvl))
			if err != nil {
				t.Error(err)
			}
			if d.ok {
				admitted.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	trips := reads() - before - 1 // the INFO before
	if admitted.Load() != 50 {
		t.Errorf("%d of 64 admitted against a limit of 50", admitted.Load())
	}
	if trips >= 64 {
		t.Errorf("64 concurrent admissions took %d round trips; they should share pipelines", trips)
	}
	t.Logf("64 concurrent admissions in %d round trips", trips)

	if err := s.client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := s.admit(ctx, testAdmission(1, tenancy.Level{Kind: "key", Name: "k-after-flush"}))
	if err != nil || !d.ok {
		t.Fatalf("admission after SCRIPT FLUSH: %v %+v", err, d)
	}
}

// An admission whose request stopped waiting before the sender took it
// is not sent: nothing is counted for it.
func TestRedisGoneAdmissionNotSent(t *testing.T) {
	_, s := startRedisStore(t)
	ctx := context.Background()
	lvl := tenancy.Level{Kind: "key", Name: "k-gone", Limits: tenancy.Limits{RequestsPerMinute: 1}}
	gone := &waiter{a: testAdmission(1, lvl), done: make(chan struct{})}
	gone.gone.Store(true)
	if err := s.run(ctx, nil, []*waiter{gone}); err != nil {
		t.Fatal(err)
	}
	if gone.err == nil {
		t.Error("the gone admission has no error")
	}
	if d, err := s.admit(ctx, testAdmission(1, lvl)); err != nil || !d.ok {
		t.Fatalf("the only admission sent was refused: %v %+v", err, d)
	}
}

// After Redis fails once, the store is down: admissions fail at once
// with errStoreDown (no dial), settlements stay queued, and when a probe
// finds Redis again, admissions count there and the queue is sent.
func TestRedisStoreBreaker(t *testing.T) {
	r, s := startRedisStore(t)
	s.probeEvery = 100 * time.Millisecond
	ctx := context.Background()
	lvl := tenancy.Level{Kind: "key", Name: "k-breaker", Limits: tenancy.Limits{RequestsPerMinute: 100}}
	if _, err := s.admit(ctx, testAdmission(1, lvl)); err != nil {
		t.Fatal(err)
	}
	r.stop()
	if _, err := s.admit(ctx, testAdmission(1, lvl)); err == nil {
		t.Fatal("an admission with Redis stopped succeeded")
	}
	for i := range 3 {
		if _, err := s.admit(ctx, testAdmission(1, lvl)); !errors.Is(err, errStoreDown) {
			t.Fatalf("admission %d while down: got %v, want the store marked down", i, err)
		}
	}
	a := testAdmission(1, lvl)
	_ = s.settle(ctx, &settlement{adm: a, prompt: 1, completion: 1})
	if _, err := s.ReadUsage(lvl.Node(), a.now, a.now); err == nil {
		t.Fatal("usage read while Redis is stopped")
	}
	if s.pending() != 1 {
		t.Fatalf("%d settlements queued while down, want 1", s.pending())
	}
	startRedisServer(t, r.port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := s.admit(ctx, testAdmission(1, lvl))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admissions did not resume after Redis returned: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for s.pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if s.pending() != 0 {
		t.Fatal("the queued settlement was not sent after Redis returned")
	}
}
