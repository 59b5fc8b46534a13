package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/internal/statefmt"
)

// kFormat is the shared state's layout marker (statefmt): a node of an
// older llmgw does not join a cluster whose state a newer one wrote in a
// layout it does not know.
const kFormat = "state-format"

// checkFormat refuses the cluster's store when a newer llmgw wrote its
// state in a layout this one does not know, and marks it as this
// llmgw's otherwise. A store that does not answer now is not refused
// (the node serves what it knows, as it does when the store goes away);
// the check is made again at the next start.
func (m *Member) checkFormat(version string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	raw, err := m.rdb.Get(ctx, m.key(kFormat)).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		m.logger.Warn("the cluster store's state layout could not be checked", zap.Error(err))
		return nil
	}
	if err == nil {
		var mk statefmt.Marker
		if json.Unmarshal(raw, &mk) == nil {
			if err := statefmt.Check(mk, "the cluster store "+m.cfg.StoreName(), version); err != nil {
				return err
			}
			if mk.Layout == statefmt.Layout {
				return nil
			}
		}
	}
	b, _ := json.Marshal(statefmt.Mine(version))
	return m.rdb.Set(ctx, m.key(kFormat), b, 0).Err()
}
