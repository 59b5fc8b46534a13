// Package reqlog is the request log: every request the llm handlers
// answer (and every MCP tool call), recorded once with who asked, which
// model was asked and which served, where, how it ended, its tokens,
// cost, latency and time to first byte, and the cache's and guardrails'
// outcomes; bodies only for the tenants the config names, with a
// retention of their own.
//
// The first llm handler of a request makes its openai.Tracked and hands
// it to the Log when the chain has returned; Add only puts a pointer on a
// channel, and the Log's goroutine turns it into a record and writes
// records in batches to the Store: a bbolt file on a single node, a Redis
// stream in a cluster (one log for every node). The Log lives in a pool
// keyed by its store, so a reload neither loses nor repeats a record.
// Retention bounds the log by age and by count.
//
// It imports no part of the app above it.
package reqlog
