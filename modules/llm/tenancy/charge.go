package tenancy

import (
	"context"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// Charger counts the tokens a module spends for a tenant outside a
// request (a knowledge base embedding its files and its queries) into
// the tenant's limits and usage; llm_quota registers its counter store.
type Charger interface {
	// Charge counts prompt tokens of model m, and their cost at its
	// price, at every level of t, as a request's usage is settled but
	// without a reservation and without taking a request slot.
	Charge(ctx context.Context, t *Tenant, m *catalog.Model, promptTokens int64) error
	// Room returns a *LimitError when a level of t has used up its
	// tokens per day or its budget, nil while there is room.
	Room(ctx context.Context, t *Tenant) error
}

// Charge is tokens a module spent for a key outside a request.
type Charge struct {
	// Key is the id of the key the tokens were spent for; without one
	// nothing is charged.
	Key string
	// Project is the key's project ("org/team/project"): its levels are
	// charged when the key has since been deleted.
	Project string
	// Model is the catalog model (name or alias) that used the tokens.
	Model        string
	PromptTokens int64
}

// LimitError is a level of a tenant that has no room for more tokens.
type LimitError struct {
	// Code is rate_limit_exceeded (tokens per day) or
	// insufficient_quota (budget), as llm_quota's 429s say.
	Code string
	// Message names the level and its limit, and when it renews.
	Message    string
	RetryAfter time.Duration
}

func (e *LimitError) Error() string { return e.Message }
