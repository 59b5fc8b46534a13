package llm

import (
	"context"
	"errors"
	"io/fs"
	"net/http"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// presetHost is the app as the presets' service sees it (package presets).
type presetHost struct{ a *App }

func (h presetHost) Models() []*catalog.Model { return h.a.v().models }

// WhyNot is why the cluster cannot run m: its engine (on this node,
// outside a cluster), its settings, the room for one replica.
func (h presetHost) WhyNot(_ context.Context, m *catalog.Model) []string {
	a := h.a
	a.mu.Lock()
	defer a.mu.Unlock()
	ps, _, err := a.loadShapes(m)
	if err != nil && a.cluster == nil {
		return []string{err.Error()}
	}
	for i, p := range ps {
		if err := catalog.CheckEngineSettings(m.Shape(i), p.Info()); err != nil {
			return []string{err.Error()}
		}
	}
	pl := a.node.Ledger.PlanOn(m, 1, a.nodeName())
	if a.cluster != nil {
		pl = a.planCluster(m, 1)
	}
	if !pl.Fits {
		return []string{pl.Reason}
	}
	return nil
}

func (h presetHost) Add(r *http.Request, m *catalog.Model) (*llmapi.AddedModel, error) {
	return h.a.addRuntime(r, m)
}

func (h presetHost) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := h.a.storage.Load(ctx, key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

func (h presetHost) Store(ctx context.Context, key string, b []byte) error {
	return h.a.storage.Store(ctx, key, b)
}

// handlePresets answers /llm/presets and what is under it.
func handlePresets(w http.ResponseWriter, r *http.Request) error {
	a, err := running()
	if err != nil {
		return err
	}
	return a.presets.ServeHTTP(w, r)
}
