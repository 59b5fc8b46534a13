package llm

import (
	"github.com/caddyserver/certmagic"
)

// SharedStorage is a Caddy storage every node of the cluster reads and
// writes: keys in the cluster's Redis. Handlers that keep state which a
// person may carry from one node to the next (llm_admin's sign-in
// sessions, their last use, a language choice) keep it there, so that a
// session made on one node works on every node and signing out ends it
// on all of them. Nil when this llmgw is not in a cluster: such a handler
// uses Caddy's own storage.
//
// Unlike the catalog's shared state, a write here tells no other node: it
// is read when needed.
func (a *App) SharedStorage() certmagic.Storage {
	if a == nil || a.cluster == nil {
		return nil
	}
	return a.cluster.SharedStorage()
}
