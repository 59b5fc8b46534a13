package llmquota

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm"
)

// redisStore keeps counters in Redis. Admission and settlement are one
// Lua script each, so every level is checked and counted atomically and
// any number of gateway instances enforce one exact limit.
type redisStore struct {
	client *redis.Client
}

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
	return &redisStore{client: redis.NewClient(opts)}, nil
}

func (s *redisStore) Destruct() error { return s.client.Close() }

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
	keys := make([]string, 0, 5*len(a.levels))
	args := make([]any, 0, 4+9*len(a.levels))
	args = append(args, a.now.UnixMilli(), a.est, a.reqID, a.now.Add(a.lease).UnixMilli())
	for _, lp := range a.levels {
		keys = append(keys, lp.keys[:]...)
		for _, l := range lp.limits {
			args = append(args, l)
		}
		p := lp.level.Limits.BudgetPeriod
		for k := kindRequests; k <= kindBudget; k++ {
			args = append(args, int64(ttl(k, p)/time.Second))
		}
	}
	res, err := admitScript.Run(ctx, s.client, keys, args...).Int64Slice()
	if err != nil {
		return decision{}, err
	}
	d := decision{ok: res[0] == 0, failLevel: int(res[0]) - 1, failKind: int(res[1]), counts: make([][5]int64, len(a.levels))}
	for i := range a.levels {
		copy(d.counts[i][:], res[2+5*i:7+5*i])
	}
	return d, nil
}

// settleScript applies the difference between reservation and usage,
// adds the cost, ends the in-flight lease and records usage by hour.
// KEYS: 5 per level, then one usage hash per level. ARGV: delta tokens,
// cost (micros), request id, model, prompt, completion, budget TTL (s)
// per level.
var settleScript = redis.NewScript(`
local delta, cost, id, model, p, c = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local n = #KEYS / 6
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

func (s *redisStore) settle(ctx context.Context, st *settlement) error {
	a := st.adm
	keys := make([]string, 0, 6*len(a.levels))
	for _, lp := range a.levels {
		keys = append(keys, lp.keys[:]...)
	}
	args := []any{st.prompt + st.completion - a.est, st.costMicros, a.reqID, a.model, st.prompt, st.completion}
	for _, lp := range a.levels {
		keys = append(keys, lp.usageKey)
		args = append(args, int64(ttl(kindBudget, lp.level.Limits.BudgetPeriod)/time.Second))
	}
	return settleScript.Run(ctx, s.client, keys, args...).Err()
}

func hourKey(node string, t time.Time) string {
	return "llmgw:u:" + node + ":" + t.UTC().Format("2006010215")
}

// ReadUsage implements llm.UsageReader.
func (s *redisStore) ReadUsage(node string, from, to time.Time) (map[string]*llm.Usage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
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
