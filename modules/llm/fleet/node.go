package fleet

import (
	"sync/atomic"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/place"
)

// Node is what the fleets of one process share across reloads: the
// ledger of the node's resources, the replicas still draining, and the
// hooks of the app that runs now. The app keeps it in a UsagePool.
type Node struct {
	Ledger   *place.Ledger
	draining *drainSet
	running  atomic.Pointer[Hooks]
}

// SetHooks makes h the hooks of the app that runs now.
func (n *Node) SetHooks(h *Hooks) { n.running.Store(h) }

// Mirror is the running config's mirror, or nil.
func (n *Node) Mirror() *mirror.Mirror {
	if n == nil {
		return nil
	}
	if h := n.running.Load(); h != nil {
		return h.Mirror
	}
	return nil
}

// Draining are the replicas of model still finishing their requests.
func (n *Node) Draining(model string) []*Replica { return n.draining.of(model) }

func (n *Node) wantMore() {
	if h := n.running.Load(); h != nil && h.WantMore != nil {
		h.WantMore()
	}
}

func (n *Node) storeDown() error {
	if h := n.running.Load(); h != nil && h.StoreDown != nil {
		return h.StoreDown()
	}
	return nil
}

// Destruct lets the pool drop the node; nothing runs in it.
func (n *Node) Destruct() error { return nil }
