package llm

import (
	"github.com/llmgw/llmgw/modules/openai/responsesapi"
)

// useResponseStore points the Responses API's store at the cluster's
// Redis, or back at the node's memory outside a cluster.
func (a *App) useResponseStore() {
	if a.cluster != nil {
		responsesapi.SetResponseStore(a.cluster.ResponseStore())
		return
	}
	responsesapi.SetResponseStore(nil)
}
