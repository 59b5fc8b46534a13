// Package traffic is the router's answers over time, as GET /llm/traffic
// shows them: per model, requests, errors, latency and time to first
// token (their histograms' buckets, so a step's quantiles are exact to
// the bucket), completion tokens and replicas ready. The gateway's
// metrics are sampled once a minute (and when the history is read), and
// each minute's increase is kept for a day: in memory on a single node,
// in the cluster's store through the Store interface the cluster member
// implements (every node adds its own increase and sets its own gauges,
// so the history is the cluster's). Open gives a config its History; the
// last totals and the minutes kept on this node live in a pool, so a
// reload neither loses the history nor counts an answer twice. Nothing is
// added to the request path. It imports no part of the app above it: the
// app hands it the metrics to sample.
package traffic
