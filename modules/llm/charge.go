package llm

import (
	"context"
	"errors"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// RegisterCharger hands the charges of modules to c until the returned
// function is called. The chargers are the process's, as the usage
// readers are; each counter store registers once, under its own id.
func (a *App) RegisterCharger(id string, c tenancy.Charger) func() {
	a.shared.chargers.Store(id, c)
	return func() { a.shared.chargers.CompareAndDelete(id, c) }
}

// Charge counts tokens a module spent for a key into the key's levels
// through the registered chargers; without llm_quota it does nothing. A
// revoked key's project is charged; a deleted key's project too, when
// c names it; else the charge is dropped (and logged at debug level).
func (a *App) Charge(ctx context.Context, c tenancy.Charge) error {
	if c.Key == "" || c.PromptTokens <= 0 {
		return nil
	}
	t, ok := a.chargedTenant(c.Key, c.Project)
	if !ok {
		a.debug("dropping a charge: its key and its project are gone", zap.String("key", catalog.BoundedLog(c.Key)),
			zap.String("project", c.Project), zap.String("model", c.Model), zap.Int64("prompt_tokens", c.PromptTokens))
		return nil
	}
	m, err := a.Lookup(c.Model)
	if err != nil {
		m = &catalog.Model{Name: c.Model} // removed since: counted without a price
	}
	var errs []error
	a.shared.chargers.Range(func(_, v any) bool {
		errs = append(errs, v.(tenancy.Charger).Charge(ctx, t, m, c.PromptTokens))
		return true
	})
	return errors.Join(errs...)
}

// Room returns a *LimitError when a level of the key (or of its project,
// as Charge resolves it) has used up its tokens per day or its budget;
// nil while there is room, without llm_quota, and for keys Charge drops.
// Other errors (a counter store away) are the chargers'.
func (a *App) Room(ctx context.Context, key, project string) error {
	if key == "" {
		return nil
	}
	t, ok := a.chargedTenant(key, project)
	if !ok {
		return nil
	}
	var err error
	a.shared.chargers.Range(func(_, v any) bool {
		err = v.(tenancy.Charger).Room(ctx, t)
		return err == nil
	})
	return err
}

// ProjectTenant is a project's tenant (its levels, with no key), for
// work done for the project without a key, such as an operator's upload.
func (a *App) ProjectTenant(project string) (*tenancy.Tenant, bool) {
	return a.chargedTenant("", project)
}

// chargedTenant is the tenant a charge for a key counts at.
func (a *App) chargedTenant(keyID, project string) (*tenancy.Tenant, bool) {
	if kr := a.keys.Load(); kr != nil {
		return kr.Spender(keyID, project)
	}
	return nil, false
}

func (a *App) debug(msg string, fields ...zap.Field) {
	if c := a.logger.Check(zapcore.DebugLevel, msg); c != nil {
		c.Write(fields...)
	}
}
