package llm

import (
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/mirror"

	"github.com/llmgw/llmgw/modules/llm/weights"
)

// needsMirror says whether the app must build its mirror: a mirror block
// is configured or a model's source goes through it.
func (a *App) needsMirror() bool {
	if a.Mirror != nil {
		return true
	}
	if weights.AdaptersNeedMirror(a.Models) {
		return true
	}
	for _, m := range a.Models {
		if weights.IsMirrorSource(m.Source) || strings.HasPrefix(m.Source, "http://") || strings.HasPrefix(m.Source, "https://") {
			return true
		}
	}
	return false
}

// MirrorStores are the weights mirror's S3 stores, nil without a mirror:
// other parts keep their own objects there (the knowledge bases' files),
// under prefixes of their own.
func (a *App) MirrorStores() []mirror.Store {
	if a.mirror == nil {
		return nil
	}
	return a.mirror.Stores()
}

// provisionMirror builds the mirror, or takes the one an earlier config
// with the same mirror block built, and starts its reconciliation.
func (a *App) provisionMirror() error {
	if !a.needsMirror() {
		return nil
	}
	m, key, err := weights.Open(a.Mirror, caddy.AppDataDir(), a.logger.Named("mirror"))
	if err != nil {
		return err
	}
	a.mirrorKey, a.mirror = key, m
	return nil
}
