// Package guardhist is the guardrails' outcomes over time, as GET
// /llm/guardrails/history shows them: the totals of
// llmgw_guardrail_checks_total are sampled once a minute (and when the
// history is read), and each minute's increase is kept for a day: in
// memory on a single node, in the cluster's store through the Store
// interface the cluster member implements (every node adds its own
// increase, so the history is the cluster's). Open gives a config its
// History; the last totals and the minutes kept on this node live in a
// pool, so a reload neither loses the history nor counts an outcome
// twice. It imports no part of the app above it: the app hands it the
// totals to sample.
package guardhist
