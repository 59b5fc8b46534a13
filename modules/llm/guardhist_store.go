package llm

import (
	"context"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm/guardhist"
)

// The cluster's guardrails history in Redis, a hash per minute: the
// member is the history's Store.

// AddMinute adds a minute's increase to the cluster's history.
func (m *member) AddMinute(ctx context.Context, minute int64, delta map[string]int64) error {
	key := m.key("guardhist:" + strconv.FormatInt(minute, 10))
	p := m.rdb.TxPipeline()
	for k, d := range delta {
		p.HIncrBy(ctx, key, k, d)
	}
	p.Expire(ctx, key, guardhist.TTL)
	_, err := p.Exec(ctx)
	return err
}

// ReadMinutes adds the cluster's minutes in [from, to).
func (m *member) ReadMinutes(ctx context.Context, from, to int64, add func(minute int64, key string, n int64)) error {
	p := m.rdb.Pipeline()
	for min := from; min < to; min++ {
		p.HGetAll(ctx, m.key("guardhist:"+strconv.FormatInt(min, 10)))
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		return err
	}
	for i, c := range cmds {
		for k, v := range c.(*redis.MapStringStringCmd).Val() {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				add(from+int64(i), k, n)
			}
		}
	}
	return nil
}

// Interface guards
var _ guardhist.Store = (*member)(nil)
