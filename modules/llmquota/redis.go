package llmquota

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// redisStore keeps counters in Redis. Admission and settlement are one
// Lua script each, so every level is checked and counted atomically and
// any number of gateway instances enforce one exact limit.
//
// One sender goroutine talks to Redis: it sends every admission waiting
// and every settlement queued in one pipeline, and while that pipeline
// is out, the next requests gather for the next one. A request thus costs
// at most one round trip, and under load many share one: a settlement
// rides along with the next admissions (so this instance's next request
// sees it), or goes at once when none is waiting. Queued settlements
// outlive Redis outages and are sent when it returns; each is applied
// once (the script records its request id).
type redisStore struct {
	client *redis.Client

	mu      sync.Mutex
	queue   []*settlement
	waiting []*waiter
	sending int // settlements taken from the queue, not yet sent
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}

	// down is set while Redis is unreachable (breaker.go).
	down       atomic.Pointer[outage]
	probeEvery time.Duration
}

// waiter is one admission waiting for the sender.
type waiter struct {
	a    *admission
	done chan struct{} // closed when res or err is set
	res  []int64
	err  error
	// gone is set when the request stopped waiting (its client left):
	// an admission not yet sent is then not sent at all.
	gone atomic.Bool
}

const (
	// maxQueued bounds the settlements kept while Redis is unreachable.
	maxQueued = 1 << 20
	// maxBatch bounds the settlements in one pipeline, so a queue that
	// grew during an outage goes out in pieces that each fit the timeout.
	maxBatch = 1024
)

var errStoreClosed = errors.New("the quota store is shutting down")

func newRedisStore(url string) (*redisStore, error) {
	if strings.Contains(url, "master_name=") {
		// Sentinel: redis://[user:pass@]sentinel1:26379?master_name=mymaster&addr=sentinel2:26379…
		fo, err := redis.ParseFailoverURL(url)
		if err != nil {
			return nil, fmt.Errorf("%w; with Sentinel use redis://sentinel-host:26379?master_name=mymaster&addr=other-sentinel:26379", err)
		}
		fo.DialTimeout, fo.ReadTimeout, fo.WriteTimeout = time.Second, time.Second, time.Second
		fo.MaxRetries, fo.Protocol = 1, 2
		return newStoreOn(redis.NewFailoverClient(fo)), nil
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w; use redis://host:port or redis://user:password@host:port/db", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, time.Second, time.Second
	opts.MaxRetries = 1
	// Two dials per attempt, not go-redis's five: an outage is handled by
	// marking the store down (breaker.go), not by waiting here.
	opts.DialerRetries, opts.DialerRetryTimeout = 2, 50*time.Millisecond
	// RESP2: the counters need no push notifications, and checking for
	// them costs CPU on every reply.
	opts.Protocol = 2
	return newStoreOn(redis.NewClient(opts)), nil
}

func newStoreOn(c *redis.Client) *redisStore {
	s := &redisStore{client: c, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}), probeEvery: probeInterval}
	go s.sender()
	return s
}

// Destruct sends what is queued (for up to five seconds) and disconnects.
func (s *redisStore) Destruct() error {
	close(s.stop)
	<-s.stopped
	return s.client.Close()
}

// sender sends waiting admissions and queued settlements, a pipeline at
// a time, until stopped.
func (s *redisStore) sender() {
	defer close(s.stopped)
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-s.kick:
		case <-s.stop:
			s.closing()
			return
		}
		for {
			if err := s.isDown(); err != nil {
				s.failWaiting(err) // settlements wait for the probe
				break
			}
			ws, q := s.takeBatch(true)
			if len(ws) == 0 && len(q) == 0 {
				break
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := s.run(ctx, q, ws)
			cancel()
			s.mu.Lock()
			s.sending -= len(q)
			s.mu.Unlock()
			for _, w := range ws {
				close(w.done)
			}
			if err == nil {
				backoff = 50 * time.Millisecond
				continue
			}
			if unreachable(err) {
				s.markDown(err)
				break
			}
			// Redis answered with an error. Admissions have it;
			// settlements are queued again and retried later, or with
			// the next admission, whichever comes first.
			select {
			case <-time.After(backoff):
				backoff = min(2*backoff, 2*time.Second)
				s.wake()
			case <-s.kick:
				s.wake()
			case <-s.stop:
				s.closing()
				return
			}
			break
		}
	}
}

// closing fails the admissions still waiting and sends the queued
// settlements, for up to five seconds.
func (s *redisStore) closing() {
	s.failWaiting(errStoreClosed)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n == 0 || s.flush(ctx) != nil {
			return
		}
	}
}

func (s *redisStore) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// takeBatch takes up to maxBatch settlements and, if asked, the waiting
// admissions.
func (s *redisStore) takeBatch(admissions bool) ([]*waiter, []*settlement) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ws []*waiter
	if admissions {
		ws, s.waiting = s.waiting, nil
	}
	q := s.queue
	if len(q) > maxBatch {
		q, s.queue = q[:maxBatch:maxBatch], q[maxBatch:]
	} else {
		s.queue = nil
	}
	s.sending += len(q)
	return ws, q
}

// requeue puts back settlements that were not sent, oldest first.
func (s *redisStore) requeue(q []*settlement) {
	if len(q) == 0 {
		return
	}
	s.mu.Lock()
	s.queue = append(q, s.queue...)
	if over := len(s.queue) - maxQueued; over > 0 {
		metricDropped.Add(float64(over))
		s.queue = s.queue[over:]
	}
	s.mu.Unlock()
}

// flush sends queued settlements, up to maxBatch, in one pipeline now.
func (s *redisStore) flush(ctx context.Context) error {
	_, q := s.takeBatch(false)
	if len(q) == 0 {
		return nil
	}
	err := s.run(ctx, q, nil)
	s.mu.Lock()
	s.sending -= len(q)
	s.mu.Unlock()
	return err
}

// pending counts the settlements not yet in Redis.
func (s *redisStore) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) + s.sending
}

// run sends settlements, then admissions, in one pipeline, and returns
// the first error. Settlements that fail are queued again; each
// admission's answer or error is put in its waiter (whose done the
// caller closes). Scripts missing from Redis (it restarted) are loaded
// and what failed for that is sent once more.
func (s *redisStore) run(ctx context.Context, q []*settlement, ws []*waiter) error {
	for attempt := 0; ; attempt++ {
		pipe := s.client.Pipeline()
		settles := make([]*redis.Cmd, len(q))
		for i, st := range q {
			settles[i] = settleCmd(ctx, st)
			_ = pipe.Process(ctx, settles[i])
		}
		adms := make([]*redis.Cmd, len(ws))
		for i, w := range ws {
			if w.gone.Load() {
				w.err = context.Canceled
				continue
			}
			adms[i] = admitCmd(ctx, w.a)
			_ = pipe.Process(ctx, adms[i])
		}
		_, _ = pipe.Exec(ctx)
		var failed []*settlement
		var retry []*waiter
		var firstErr error
		noScript := false
		for i, c := range settles {
			if err := c.Err(); err != nil {
				failed = append(failed, q[i])
				firstErr = cmp.Or(firstErr, err)
				noScript = noScript || redis.HasErrorPrefix(err, "NOSCRIPT")
			}
		}
		for i, c := range adms {
			w := ws[i]
			if c == nil {
				continue
			}
			if w.res, w.err = c.Int64Slice(); w.err != nil {
				firstErr = cmp.Or(firstErr, w.err)
				if redis.HasErrorPrefix(w.err, "NOSCRIPT") {
					retry, noScript = append(retry, w), true
				}
			}
		}
		if noScript && attempt == 0 {
			if err := s.loadScripts(ctx); err == nil {
				q, ws = failed, retry
				continue
			}
		}
		s.requeue(failed)
		return firstErr
	}
}

func (s *redisStore) loadScripts(ctx context.Context) error {
	if err := admitScript.Load(ctx, s.client).Err(); err != nil {
		return err
	}
	if err := settleScript.Load(ctx, s.client).Err(); err != nil {
		return err
	}
	return chargeScript.Load(ctx, s.client).Err()
}

// admitScript checks every level, then counts at every level, or nothing.
// KEYS: 5 per level (requests, tokens minute, tokens day, budget,
// in-flight set). ARGV: now (ms), estimate, request id, lease end (ms),
// then per level its 5 limits and 4 TTLs (s) in one comma-separated
// argument. Returns the failing level (1-based, 0 = admitted), the
// failing kind, then 5 counts per level.
var admitScript = redis.NewScript(`
local now, est, id, leaseEnd = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local n = #KEYS / 5
local out = {0, 0}
local lim = {}
for i = 0, n - 1 do
  local v = {}
  for x in string.gmatch(ARGV[5 + i], '[^,]+') do v[#v + 1] = tonumber(x) end
  lim[i] = v
end
for i = 0, n - 1 do
  local k, v = i * 5, lim[i]
  local c = {}
  for j = 1, 4 do c[j] = tonumber(redis.call('GET', KEYS[k + j]) or '0') end
  redis.call('ZREMRANGEBYSCORE', KEYS[k + 5], '-inf', now)
  c[5] = redis.call('ZCARD', KEYS[k + 5])
  if out[1] == 0 then
    local kind = 0
    if v[1] > 0 and c[1] + 1 > v[1] then kind = 1
    elseif v[2] > 0 and c[2] + est > v[2] then kind = 2
    elseif v[3] > 0 and c[3] + est > v[3] then kind = 3
    elseif v[4] > 0 and c[4] >= v[4] then kind = 4
    elseif v[5] > 0 and c[5] + 1 > v[5] then kind = 5 end
    if kind > 0 then out[1], out[2] = i + 1, kind end
  end
  for j = 1, 5 do out[#out + 1] = c[j] end
end
if out[1] ~= 0 then return out end
for i = 0, n - 1 do
  local k, v = i * 5, lim[i]
  local add = {1, est, est}
  for j = 1, 3 do
    redis.call('SET', KEYS[k + j], 0, 'EX', v[5 + j], 'NX')
    redis.call('INCRBY', KEYS[k + j], add[j])
    out[2 + i * 5 + j] = out[2 + i * 5 + j] + add[j]
  end
  if v[5] > 0 then
    redis.call('ZADD', KEYS[k + 5], leaseEnd, id)
    redis.call('PEXPIREAT', KEYS[k + 5], leaseEnd + 60000)
    out[2 + i * 5 + 5] = out[2 + i * 5 + 5] + 1
  end
end
return out
`)

func (s *redisStore) admit(ctx context.Context, a *admission) (decision, error) {
	if err := s.isDown(); err != nil {
		return decision{}, err
	}
	w := &waiter{a: a, done: make(chan struct{})}
	s.mu.Lock()
	s.waiting = append(s.waiting, w)
	s.mu.Unlock()
	s.wake()
	select {
	case <-w.done:
	case <-ctx.Done():
		w.gone.Store(true)
		return decision{}, ctx.Err()
	case <-s.stopped:
		select {
		case <-w.done:
		default:
			return decision{}, errStoreClosed
		}
	}
	if w.err != nil {
		return decision{}, w.err
	}
	res := w.res
	d := decision{ok: res[0] == 0, failLevel: int(res[0]) - 1, failKind: int(res[1]), counts: a.newCounts()}
	for i := range a.levels {
		copy(d.counts[i][:], res[2+5*i:7+5*i])
	}
	return d, nil
}

// admitCmd is the admission's script call. Its arguments are built in
// one slice; keys and per-level limits come boxed from their memos.
func admitCmd(ctx context.Context, a *admission) *redis.Cmd {
	args := make([]any, 0, 3+6*len(a.levels)+4)
	args = append(args, "evalsha", admitScript.Hash(), 5*len(a.levels))
	for _, lp := range a.levels {
		args = append(args, lp.win.boxed[:5]...)
	}
	args = append(args, a.now.UnixMilli(), a.est, a.reqID, a.now.Add(a.lease).UnixMilli())
	args = append(args, a.redisArgs.admit...)
	return redis.NewCmd(ctx, args...)
}

// redisArgs are a tenant's per-level script arguments, made once per
// tenant (llm.Tenant's memo): limits and TTLs for admission, the budget's
// TTL for settlement.
type redisArgs struct{ admit, budgetTTL []any }

type redisArgsKey struct{}

func redisArgsOf(t *tenancy.Tenant) *redisArgs {
	return t.Memo(redisArgsKey{}, func() any {
		ra := &redisArgs{}
		for i := range t.Levels {
			l := &t.Levels[i]
			b := make([]byte, 0, 64)
			for j, n := range levelLimits(l) {
				if j > 0 {
					b = append(b, ',')
				}
				b = strconv.AppendInt(b, n, 10)
			}
			for k := kindRequests; k <= kindBudget; k++ {
				b = append(b, ',')
				b = strconv.AppendInt(b, int64(ttl(k, l.Limits.BudgetPeriod)/time.Second), 10)
			}
			ra.admit = append(ra.admit, string(b))
			ra.budgetTTL = append(ra.budgetTTL, int64(ttl(kindBudget, l.Limits.BudgetPeriod)/time.Second))
		}
		return ra
	}).(*redisArgs)
}

// settleScript applies the difference between reservation and usage,
// adds the cost, ends the in-flight lease and records usage by hour, once
// per request id. KEYS: 5 per level, then one usage hash per level, then
// the request's settled marker. ARGV: delta tokens, cost (micros),
// request id, model, prompt, completion, budget TTL (s) per level.
var settleScript = redis.NewScript(`
if not redis.call('SET', KEYS[#KEYS], 1, 'NX', 'EX', 86400) then return 0 end
local delta, cost, id, model, p, c = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local n = (#KEYS - 1) / 6
for i = 0, n - 1 do
  local k = i * 5
  for j = 2, 3 do
    if delta ~= 0 and redis.call('EXISTS', KEYS[k + j]) == 1 then redis.call('INCRBY', KEYS[k + j], delta) end
  end
  if cost > 0 then
    redis.call('SET', KEYS[k + 4], 0, 'EX', ARGV[7 + i], 'NX')
    redis.call('INCRBY', KEYS[k + 4], cost)
  end
  redis.call('ZREM', KEYS[k + 5], id)
  local u = KEYS[n * 5 + i + 1]
  redis.call('HINCRBY', u, model .. '|requests', 1)
  redis.call('HINCRBY', u, model .. '|input', p)
  redis.call('HINCRBY', u, model .. '|output', c)
  redis.call('HINCRBY', u, model .. '|cost', cost)
  redis.call('EXPIRE', u, 7776000)
end
return 1
`)

// settle queues a settlement: the next admission or the flusher sends it.
func (s *redisStore) settle(_ context.Context, st *settlement) error {
	s.mu.Lock()
	s.queue = append(s.queue, st)
	s.mu.Unlock()
	s.wake()
	return nil
}

// settleCmd is the settlement's script call, built like admitCmd's.
func settleCmd(ctx context.Context, st *settlement) *redis.Cmd {
	if st.charge {
		return chargeCmd(ctx, st)
	}
	a := st.adm
	args := make([]any, 0, 3+6*len(a.levels)+1+6+len(a.levels))
	args = append(args, "evalsha", settleScript.Hash(), 6*len(a.levels)+1)
	for _, lp := range a.levels {
		args = append(args, lp.win.boxed[:5]...)
	}
	for _, lp := range a.levels {
		args = append(args, lp.win.boxed[5])
	}
	args = append(args, "llmgw:settled:"+a.reqID)
	args = append(args, st.prompt+st.completion-a.est, st.costMicros, a.reqID, a.model, st.prompt, st.completion)
	args = append(args, a.redisArgs.budgetTTL...)
	return redis.NewCmd(ctx, args...)
}

func hourKey(node string, t time.Time) string {
	return "llmgw:u:" + node + ":" + t.UTC().Format("2006010215")
}

// ReadUsage implements llm.UsageReader.
func (s *redisStore) ReadUsage(node string, from, to time.Time) (map[string]*llmapi.Usage, error) {
	// An operator's read tries Redis even while the store is down: it
	// may be back before the next probe.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.flush(ctx); err != nil { // what was used so far counts
		return nil, err
	}
	pipe := s.client.Pipeline()
	var cmds []*redis.MapStringStringCmd
	for h := from.UTC().Truncate(time.Hour); !h.After(to); h = h.Add(time.Hour) {
		cmds = append(cmds, pipe.HGetAll(ctx, hourKey(node, h)))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, err
	}
	s.markUp()
	out := map[string]*llmapi.Usage{}
	for _, c := range cmds {
		for field, v := range c.Val() {
			i := strings.LastIndexByte(field, '|')
			if i < 0 {
				continue
			}
			model, what := field[:i], field[i+1:]
			n, _ := strconv.ParseInt(v, 10, 64)
			u := out[model]
			if u == nil {
				u = &llmapi.Usage{}
				out[model] = u
			}
			switch what {
			case "requests":
				u.Requests += n
			case "input":
				u.InputTokens += n
			case "output":
				u.OutputTokens += n
			case "cost":
				u.CostMicros += n
			}
		}
	}
	return out, nil
}
