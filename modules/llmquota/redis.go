package llmquota

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm"
)

// redisStore keeps counters in Redis. Admission and settlement are one
// Lua script each, so every level is checked and counted atomically and
// any number of gateway instances enforce one exact limit.
//
// A request costs one round trip: settlements are queued and sent in the
// same pipeline as the next admission (so this instance's next request
// sees them), or by a background flusher at once when no request comes.
// Queued settlements outlive Redis outages and are sent when it returns;
// each is applied once (the script records its request id).
type redisStore struct {
	client *redis.Client

	mu      sync.Mutex
	queue   []*settlement
	sending int // taken from the queue by flush, not yet sent
	kick    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// maxQueued bounds the settlements kept while Redis is unreachable.
const maxQueued = 1 << 20

func newRedisStore(url string) (*redisStore, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("%w; use redis://host:port or redis://user:password@host:port/db", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, time.Second, time.Second
	opts.MaxRetries = 1
	// RESP2: the counters need no push notifications, and checking for
	// them costs CPU on every reply.
	opts.Protocol = 2
	s := &redisStore{client: redis.NewClient(opts), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
	go s.flusher()
	return s, nil
}

// Destruct sends what is queued (for up to five seconds) and disconnects.
func (s *redisStore) Destruct() error {
	close(s.stop)
	<-s.stopped
	return s.client.Close()
}

// flusher sends queued settlements that no admission took along.
func (s *redisStore) flusher() {
	defer close(s.stopped)
	backoff := 50 * time.Millisecond
	for {
		select {
		case <-s.kick:
		case <-s.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.flush(ctx)
			cancel()
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := s.flush(ctx)
		cancel()
		if err == nil {
			backoff = 50 * time.Millisecond
			continue
		}
		select { // Redis is away: try again later
		case <-time.After(backoff):
			backoff = min(2*backoff, 2*time.Second)
			s.wake()
		case <-s.stop:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.flush(ctx)
			cancel()
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

func (s *redisStore) take() []*settlement {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.mu.Unlock()
	return q
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

// flush sends every queued settlement in one pipeline.
func (s *redisStore) flush(ctx context.Context) error {
	s.mu.Lock()
	q := s.queue
	s.queue = nil
	s.sending += len(q)
	s.mu.Unlock()
	if len(q) == 0 {
		return nil
	}
	_, err := s.run(ctx, q, nil)
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

// run sends settlements, and an admission if a is set, in one pipeline.
// Settlements that fail are queued again. Scripts missing from Redis (it
// restarted) are loaded and the pipeline sent once more.
func (s *redisStore) run(ctx context.Context, q []*settlement, a *admission) (*redis.Cmd, error) {
	for attempt := 0; ; attempt++ {
		pipe := s.client.Pipeline()
		settles := make([]*redis.Cmd, len(q))
		for i, st := range q {
			keys, args := settleArgs(st)
			settles[i] = pipe.EvalSha(ctx, settleScript.Hash(), keys, args...)
		}
		var adm *redis.Cmd
		if a != nil {
			keys, args := admitArgs(a)
			adm = pipe.EvalSha(ctx, admitScript.Hash(), keys, args...)
		}
		_, _ = pipe.Exec(ctx)
		noScript := false
		var failed []*settlement
		var firstErr error
		for i, c := range settles {
			if err := c.Err(); err != nil {
				noScript = noScript || redis.HasErrorPrefix(err, "NOSCRIPT")
				failed = append(failed, q[i])
				firstErr = cmp.Or(firstErr, err)
			}
		}
		if adm != nil && adm.Err() != nil {
			noScript = noScript || redis.HasErrorPrefix(adm.Err(), "NOSCRIPT")
		}
		if noScript && attempt == 0 {
			if err := s.loadScripts(ctx); err == nil {
				q = failed
				continue
			}
		}
		s.requeue(failed)
		if adm != nil {
			return adm, adm.Err()
		}
		return nil, firstErr
	}
}

func (s *redisStore) loadScripts(ctx context.Context) error {
	if err := admitScript.Load(ctx, s.client).Err(); err != nil {
		return err
	}
	return settleScript.Load(ctx, s.client).Err()
}

// admitScript checks every level, then counts at every level, or nothing.
// KEYS: 5 per level (requests, tokens minute, tokens day, budget,
// in-flight set). ARGV: now (ms), estimate, request id, lease end (ms),
// then 5 limits and 4 TTLs (s) per level. Returns the failing level
// (1-based, 0 = admitted), the failing kind, then 5 counts per level.
var admitScript = redis.NewScript(`
local now, est, id, leaseEnd = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local n = #KEYS / 5
local out = {0, 0}
for i = 0, n - 1 do
  local k, a = i * 5, 4 + i * 9
  local c = {}
  for j = 1, 4 do c[j] = tonumber(redis.call('GET', KEYS[k + j]) or '0') end
  redis.call('ZREMRANGEBYSCORE', KEYS[k + 5], '-inf', now)
  c[5] = redis.call('ZCARD', KEYS[k + 5])
  if out[1] == 0 then
    local l = {}
    for j = 1, 5 do l[j] = tonumber(ARGV[a + j]) end
    local kind = 0
    if l[1] > 0 and c[1] + 1 > l[1] then kind = 1
    elseif l[2] > 0 and c[2] + est > l[2] then kind = 2
    elseif l[3] > 0 and c[3] + est > l[3] then kind = 3
    elseif l[4] > 0 and c[4] >= l[4] then kind = 4
    elseif l[5] > 0 and c[5] + 1 > l[5] then kind = 5 end
    if kind > 0 then out[1], out[2] = i + 1, kind end
  end
  for j = 1, 5 do out[#out + 1] = c[j] end
end
if out[1] ~= 0 then return out end
for i = 0, n - 1 do
  local k, a = i * 5, 4 + i * 9
  local add = {1, est, est}
  for j = 1, 3 do
    redis.call('SET', KEYS[k + j], 0, 'EX', ARGV[a + 5 + j], 'NX')
    redis.call('INCRBY', KEYS[k + j], add[j])
    out[2 + i * 5 + j] = out[2 + i * 5 + j] + add[j]
  end
  if tonumber(ARGV[a + 5]) > 0 then
    redis.call('ZADD', KEYS[k + 5], leaseEnd, id)
    redis.call('PEXPIREAT', KEYS[k + 5], leaseEnd + 60000)
    out[2 + i * 5 + 5] = out[2 + i * 5 + 5] + 1
  end
end
return out
`)

func (s *redisStore) admit(ctx context.Context, a *admission) (decision, error) {
	cmd, err := s.run(ctx, s.take(), a)
	if err != nil {
		return decision{}, err
	}
	res, err := cmd.Int64Slice()
	if err != nil {
		return decision{}, err
	}
	d := decision{ok: res[0] == 0, failLevel: int(res[0]) - 1, failKind: int(res[1]), counts: a.newCounts()}
	for i := range a.levels {
		copy(d.counts[i][:], res[2+5*i:7+5*i])
	}
	return d, nil
}

func admitArgs(a *admission) ([]string, []any) {
	keys := make([]string, 0, 5*len(a.levels))
	args := make([]any, 0, 4+9*len(a.levels))
	args = append(args, a.now.UnixMilli(), a.est, a.reqID, a.now.Add(a.lease).UnixMilli())
	for _, lp := range a.levels {
		keys = append(keys, lp.win.keys[:]...)
		for _, l := range lp.limits {
			args = append(args, l)
		}
		p := lp.level.Limits.BudgetPeriod
		for k := kindRequests; k <= kindBudget; k++ {
			args = append(args, int64(ttl(k, p)/time.Second))
		}
	}
	return keys, args
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

func settleArgs(st *settlement) ([]string, []any) {
	a := st.adm
	keys := make([]string, 0, 6*len(a.levels)+1)
	for _, lp := range a.levels {
		keys = append(keys, lp.win.keys[:]...)
	}
	args := make([]any, 0, 6+len(a.levels))
	args = append(args, st.prompt+st.completion-a.est, st.costMicros, a.reqID, a.model, st.prompt, st.completion)
	for _, lp := range a.levels {
		keys = append(keys, lp.win.usage)
		args = append(args, int64(ttl(kindBudget, lp.level.Limits.BudgetPeriod)/time.Second))
	}
	return append(keys, "llmgw:settled:"+a.reqID), args
}

func hourKey(node string, t time.Time) string {
	return "llmgw:u:" + node + ":" + t.UTC().Format("2006010215")
}

// ReadUsage implements llm.UsageReader.
func (s *redisStore) ReadUsage(node string, from, to time.Time) (map[string]*llm.Usage, error) {
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
	out := map[string]*llm.Usage{}
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
				u = &llm.Usage{}
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
