package llm

import (
	"context"

	"github.com/llmgw/llmgw/modules/llm/modelcall"
)

// modelClient reaches replicas for modules that use a catalog model
// themselves (the cache's embedder, a guard model, a knowledge base).
var modelClient = modelcall.New()

// Embeddings asks a catalog model (by name or alias) for the embeddings
// of texts, through one of its replicas chosen as the router would.
func (a *App) Embeddings(ctx context.Context, model string, texts []string) ([][]float32, error) {
	vecs, _, err := modelClient.Embeddings(ctx, a, model, texts)
	return vecs, err
}

// EmbeddingsUsage is Embeddings that also returns the prompt tokens the
// model reports having used (its usage.prompt_tokens; 0 when it reports
// none), for modules that charge them to a tenant (see Charge).
func (a *App) EmbeddingsUsage(ctx context.Context, model string, texts []string) ([][]float32, int64, error) {
	return modelClient.Embeddings(ctx, a, model, texts)
}

// ChatMessage is one message of a Chat call.
type ChatMessage = modelcall.Message

// Chat asks a catalog model for a short answer (temperature 0), through
// one of its replicas chosen as the router would: for modules that use a
// model themselves, such as a guard model.
func (a *App) Chat(ctx context.Context, model string, messages []ChatMessage, maxTokens int) (string, error) {
	return modelClient.Chat(ctx, a, model, messages, maxTokens)
}

// Slots reports a catalog model's free and total request slots on its
// ready replicas (see fleet.Fleet.Slots): background work such as a
// knowledge base's import paces itself by them so that interactive
// requests to the same model keep their replicas. A model without a
// ready replica has none of either.
func (a *App) Slots(model string) (free, total int) {
	m, err := a.Lookup(model)
	if err != nil {
		return 0, 0
	}
	f, ok := a.v().fleets[m.Name]
	if !ok {
		return 0, 0
	}
	return f.Slots()
}
