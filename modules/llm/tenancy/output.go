package tenancy

import (
	"fmt"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// OutputCap is the most tokens one answer may have for a model and a
// tenant, and who sets it.
type OutputCap struct {
	Tokens int64  // 0: no cap
	Level  *Level // the tenant's level that sets it; nil: the model
}

// CapOf is the smallest of the model's max_output and the tenant's
// levels' (t may be nil: no tenant). A tie is the model's. It allocates
// nothing.
func CapOf(m *catalog.Model, t *Tenant) OutputCap {
	c := OutputCap{Tokens: m.MaxOutput}
	if t == nil {
		return c
	}
	e := t.Effective.MaxOutput
	if e == 0 || (c.Tokens > 0 && c.Tokens <= e) {
		return c
	}
	for i := range t.Levels {
		if t.Levels[i].Limits.MaxOutput == e {
			return OutputCap{Tokens: e, Level: &t.Levels[i]}
		}
	}
	return OutputCap{Tokens: e}
}

// Setter names who sets the cap, for messages: model "m", your key k1,
// the project acme/research/alpha …
func (c OutputCap) Setter(model string) string {
	switch {
	case c.Level == nil:
		return fmt.Sprintf("model %q", model)
	case c.Level.Kind == "key":
		return "your key " + c.Level.Name
	}
	return "your " + c.Level.Kind + " " + c.Level.Name
}
