package llm

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgw/llmgw/modules/llm/appmetrics"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/reqlog"
)

func (a *App) registerMetrics(reg *prometheus.Registry) error {
	if reg == nil {
		return nil
	}
	for _, c := range append([]prometheus.Collector{fleet.MetricStarts, fleet.MetricQueueWait, appmetrics.Fleets(a.Status), appmetrics.Mirror(a.node)}, reqlog.Collectors()...) {
		var are prometheus.AlreadyRegisteredError
		if err := reg.Register(c); err != nil && !errors.As(err, &are) {
			return err
		}
	}
	return nil
}
