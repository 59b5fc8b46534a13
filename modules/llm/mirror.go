package llm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// mirrors holds mirrors across reloads, keyed by their config;
// activeMirror is the running config's.
var (
	activeMirror atomic.Pointer[mirror.Mirror]
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

// fetchWeights brings a model's weights to the node cache when its source
// goes through the mirror, and returns the local path to give the engine
// and a release for when the replica stops. Other sources pass unchanged.
func (f *fleet) fetchWeights(ctx context.Context) (string, func(), error) {
	src := f.m().EngineSource()
	formats := f.plugin.Info().Formats
	loadsFiles := slices.Contains(formats, catalog.FormatGGUF) || slices.Contains(formats, catalog.FormatSafetensors)
	viaMirror := weights.IsMirrorSource(src) || (loadsFiles && (strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://")))
	if !viaMirror {
		return src, func() {}, nil
	}
	mr := activeMirror.Load()
	if mr == nil {
		return "", nil, fmt.Errorf("model %q: source %s needs the mirror; configure it with a mirror block in the llm app", f.m().Name, mirror.RedactURL(src))
	}
	fe, path, err := weights.ResolveSource(ctx, mr, f.m(), f.logger)
	if err != nil {
		return "", nil, err
	}
	if loadsFiles && fe.Manifest.Format != "other" && !slices.Contains(formats, fe.Manifest.Format) {
		fe.Release()
		return "", nil, fmt.Errorf("model %q: engine %s cannot load %s weights (%s/%s); it loads %s", f.m().Name, f.m().Engine,
			fe.Manifest.Format, fe.Manifest.Model, fe.Manifest.Version, strings.Join(formats, " or "))
	}
	return path, fe.Release, nil
}
