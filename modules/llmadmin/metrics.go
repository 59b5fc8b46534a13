package llmadmin

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/apidoc"
)

// metricsPattern serves the metrics of the admin endpoint's /metrics on
// llm_admin's site, so that a Prometheus on another machine scrapes them
// with a viewer's token. Tenant admins may not read it: its series name
// every tenant's keys, usage and cost.
const metricsPattern = "GET /llm/metrics"

func init() {
	llm.DescribeAdminOperations(llm.AdminOperation{Method: "GET", Path: "/llm/metrics", Response: apidoc.Text,
		Summary: "llm_admin only: the Prometheus metrics of the admin endpoint's /metrics (text exposition format), for a Prometheus scraping with a token (authorization: credentials in its scrape config); needs the viewer role, a tenant admin may not read it (403)"})
}

// metricsHandler serves the running config's metrics registry, the one
// every llmgw_* collector and Caddy's own are registered in.
func metricsHandler(ctx caddy.Context) http.Handler {
	reg := ctx.GetMetricsRegistry()
	if reg == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_ = writeErr(w, http.StatusServiceUnavailable, "no metrics registry: the config has not started")
		})
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
