package llm

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/cluster"
	"github.com/llmgw/llmgw/modules/llm/nodeupgrade"
)

// nodeUpgrade answers POST /llm/nodes/<name>/upgrade (nodeupgrade.Serve).
func (a *App) nodeUpgrade(w http.ResponseWriter, r *http.Request, name string) error {
	out, restart, err := nodeupgrade.Serve(w, r, a.cluster, name, cluster.UpgradePath, a.logger.Named("upgrade"))
	if err != nil {
		return err
	}
	a.audit(r, "node upgraded", zap.String("node", name), zap.String("from", out.From), zap.String("to", out.To))
	err = writeJSON(w, out)
	nodeupgrade.Answered(w, restart)
	return err
}
