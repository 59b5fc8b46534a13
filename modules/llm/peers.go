package llm

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// refreshPeers lists the peers' models in the catalog as they are now
// (package federation): new ones get a fleet, those a peer no longer
// lists leave the catalog and their fleets drain.
func (a *App) refreshPeers() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ctx.Err() != nil {
		return
	}
	v, err := a.swap(a.ctx, runtimeOf(a.v(), func(ms []*catalog.Model) []*catalog.Model { return ms }))
	if err != nil {
		a.logger.Error("listing the peers' models in the catalog", zap.Error(err))
		return
	}
	for name, k := range a.fkeys {
		if _, ok := v.fleets[name]; !ok {
			delete(a.fkeys, name)
			_, _ = fleets.Delete(k)
		}
	}
}

// getPeers answers GET /llm/peers.
func getPeers(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	return writeJSON(w, a.peers.Status())
}
