// Package datalock keeps one llmgw per data directory. The llm app takes an exclusive
// flock on llmgw.lock there when it starts, and writes its pid into it;
// a second llmgw with the same data directory refuses to start, naming
// the first. (Caddy binds its ports with SO_REUSEPORT, so without this
// both would run and split the traffic.) The lock lives in a UsagePool,
// so a reload in the same process keeps it; it is released when the
// last config of the llm app is cleaned up, or when the process exits.
package datalock
