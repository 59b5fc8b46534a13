// Package audit is the llm app's audit log: every change made through the
// admin API (who, what, when, on which node), kept in Caddy storage under
// llm/audit/ in daily segments bounded by Config (keep, max_entries) and,
// in a cluster, in a shared stream every node writes to, reached through
// the Store interface the cluster member implements. Open gives a config
// its Log; the segment being written lives in a pool, so a reload goes on
// writing it. ParseQuery reads what GET /llm/audit asks for, and Log.Read
// answers it. Errors are plain or of a kind (ErrQuery, ErrCursor,
// ErrStoreDown) that the app maps to statuses. It imports no part of the
// app above it.
package audit
