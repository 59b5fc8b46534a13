package llmquota

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/mcpwire"
)

// MCP tool calls (JSON-RPC tools/call POSTed to llm_mcp) are counted per
// level against tool_calls_per_minute and tool_calls_per_day, checked
// and counted atomically at every level like requests: in this process
// with the memory store, in Redis (one Lua script) across instances.

// Tool-call limit kinds, after the request kinds.
const (
	kindToolsMinute = kindConcurrent + 1 + iota
	kindToolsDay
)

func init() {
	kindNames[kindToolsMinute] = "tool calls per minute"
	kindNames[kindToolsDay] = "tool calls per day"
}

// toolLevel is one level's tool-call limits.
type toolLevel struct {
	level             *tenancy.Level
	perMinute, perDay int64
}

// toolDecision is the answer of a tool-call counter.
type toolDecision struct {
	ok        bool
	failLevel int // index into the levels
	failKind  int
}

// toolCounter counts tool calls.
type toolCounter interface {
	admitTools(ctx context.Context, levels []toolLevel, n int64, now time.Time) (toolDecision, error)
}

// toolLevels returns the levels of t that limit tool calls (nil: none).
func toolLevels(t *tenancy.Tenant) []toolLevel {
	var out []toolLevel
	for i := range t.Levels {
		l := &t.Levels[i]
		if l.Limits.ToolCallsPerMinute > 0 || l.Limits.ToolCallsPerDay > 0 {
			out = append(out, toolLevel{level: l, perMinute: l.Limits.ToolCallsPerMinute, perDay: l.Limits.ToolCallsPerDay})
		}
	}
	return out
}

// serveMCP counts the tool calls of an MCP POST. A call over a limit is
// answered with a JSON-RPC error naming the limit, and no call of the
// body reaches the tool.
func (q *Quota) serveMCP(w http.ResponseWriter, r *http.Request, tenant *tenancy.Tenant) (served bool) {
	body, err := mcpwire.Read(r)
	if err != nil {
		return false
	}
	n := int64(body.ToolCalls())
	if n == 0 {
		return false
	}
	levels := toolLevels(tenant)
	if len(levels) == 0 {
		return false
	}
	now := time.Now()
	var counter toolCounter = q.toolStore()
	d, err := counter.admitTools(r.Context(), levels, n, now)
	if err != nil && q.fallback != nil {
		d, err = q.fallback.admitTools(r.Context(), levels, n, now)
	}
	if err != nil {
		q.logger.Error("counting tool calls", zap.Error(err))
		writeRPCError(w, body, http.StatusServiceUnavailable, 5*time.Second,
			"the quota store is unreachable, so tool calls cannot be counted; try again shortly")
		return true
	}
	if d.ok {
		return false
	}
	lv := levels[d.failLevel]
	limit := lv.perMinute
	retry := resetIn(now, kindRequests, "")
	if d.failKind == kindToolsDay {
		limit, retry = lv.perDay, resetIn(now, kindTokensDay, "")
	}
	metricRejections.WithLabelValues(lv.level.Kind, kindNames[d.failKind]).Inc()
	if c := q.logger.Check(zap.InfoLevel, "quota exceeded"); c != nil {
		c.Write(zap.String("key", tenant.KeyID), zap.String("level", lv.level.Node()), zap.String("limit", kindNames[d.failKind]))
	}
	writeRPCError(w, body, http.StatusTooManyRequests, retry,
		fmt.Sprintf("the %s %s has reached its limit of %d %s; retry in %s", lv.level.Kind, lv.level.Name, limit,
			kindNames[d.failKind], retry.Round(time.Second)))
	return true
}

// rpcLimitCode is the JSON-RPC error code of a refused tool call (in the
// range JSON-RPC leaves to servers).
const rpcLimitCode = -32029

// writeRPCError answers every request of an MCP body with a JSON-RPC
// error saying msg, with the status it stands for and Retry-After.
func writeRPCError(w http.ResponseWriter, body *mcpwire.Body, status int, retry time.Duration, msg string) {
	secs := int(retry.Seconds() + 0.999)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	body.WriteErrors(w, rpcLimitCode, func(json.RawMessage) string { return msg }, map[string]any{"status": status, "retry_after": secs})
}

// toolStore is the counter for tool calls of the configured store.
func (q *Quota) toolStore() toolCounter {
	if c, ok := q.store.(toolCounter); ok {
		return c
	}
	return q.fallback
}

// toolCounts are one level's tool calls in the current minute and day.
type toolCounts struct {
	minute, day           int64 // window ids
	perMinute, perDayUsed int64
}

// memoryTools counts tool calls in this process.
type memoryTools struct {
	mu     sync.Mutex
	counts map[string]*toolCounts
}

func (m *memoryTools) admitTools(_ context.Context, levels []toolLevel, n int64, now time.Time) (toolDecision, error) {
	minute, day := now.Unix()/60, now.UTC().Unix()/86400
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]*toolCounts{}
	}
	cs := make([]*toolCounts, len(levels))
	for i, lv := range levels {
		c := m.counts[lv.level.Node()]
		if c == nil {
			c = &toolCounts{}
			m.counts[lv.level.Node()] = c
		}
		if c.minute != minute {
			c.minute, c.perMinute = minute, 0
		}
		if c.day != day {
			c.day, c.perDayUsed = day, 0
		}
		if lv.perMinute > 0 && c.perMinute+n > lv.perMinute {
			return toolDecision{failLevel: i, failKind: kindToolsMinute}, nil
		}
		if lv.perDay > 0 && c.perDayUsed+n > lv.perDay {
			return toolDecision{failLevel: i, failKind: kindToolsDay}, nil
		}
		cs[i] = c
	}
	for _, c := range cs {
		c.perMinute += n
		c.perDayUsed += n
	}
	return toolDecision{ok: true}, nil
}

// toolScript checks every level's minute and day counters (KEYS, two per
// level) against their limits (ARGV after n and the two TTLs, two per
// level; 0 = none) and counts n on all of them, or on none. It returns
// 0, or the failing level (1-based) * 10 + 1 (minute) or 2 (day).
var toolScript = redis.NewScript(`
local n = tonumber(ARGV[1])
for i = 1, #KEYS / 2 do
  local lm, ld = tonumber(ARGV[2 + 2*i]), tonumber(ARGV[3 + 2*i])
  if lm > 0 and (tonumber(redis.call('GET', KEYS[2*i-1]) or '0') + n) > lm then return i * 10 + 1 end
  if ld > 0 and (tonumber(redis.call('GET', KEYS[2*i]) or '0') + n) > ld then return i * 10 + 2 end
end
for i = 1, #KEYS / 2 do
  redis.call('INCRBY', KEYS[2*i-1], n)
  redis.call('EXPIRE', KEYS[2*i-1], ARGV[2])
  redis.call('INCRBY', KEYS[2*i], n)
  redis.call('EXPIRE', KEYS[2*i], ARGV[3])
end
return 0`)

func (s *redisStore) admitTools(ctx context.Context, levels []toolLevel, n int64, now time.Time) (toolDecision, error) {
	if err := s.isDown(); err != nil {
		return toolDecision{}, err
	}
	minute := strconv.FormatInt(now.Unix()/60, 10)
	day := now.UTC().Format("20060102")
	keys := make([]string, 0, 2*len(levels))
	args := make([]any, 0, 3+2*len(levels))
	args = append(args, n, int64(ttl(kindRequests, "")/time.Second), int64(ttl(kindTokensDay, "")/time.Second))
	for _, lv := range levels {
		base := "llmgw:q:" + lv.level.Node() + ":"
		keys = append(keys, base+"tc:"+minute, base+"td:"+day)
		args = append(args, lv.perMinute, lv.perDay)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := toolScript.Run(ctx, s.client, keys, args...).Int64()
	if err != nil {
		if ctx.Err() == nil || ctx.Err() == context.DeadlineExceeded {
			s.markDown(err)
		}
		return toolDecision{}, err
	}
	if v == 0 {
		return toolDecision{ok: true}, nil
	}
	d := toolDecision{failLevel: int(v/10) - 1, failKind: kindToolsMinute}
	if v%10 == 2 {
		d.failKind = kindToolsDay
	}
	return d, nil
}
