package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/weights"
	"github.com/llmgw/llmgw/plugins/host"
)

// fetchWeights brings a model's weights to the node cache when its source
// goes through the mirror, and returns the local path to give the engine
// and a release for when the replica stops. Other sources pass unchanged.
func (f *Fleet) fetchWeights(ctx context.Context, m *catalog.Model, plugin *host.Plugin) (string, func(), error) {
	src := m.EngineSource()
	formats := plugin.Info().Formats
	loadsFiles := slices.Contains(formats, catalog.FormatGGUF) || slices.Contains(formats, catalog.FormatSafetensors)
	viaMirror := weights.IsMirrorSource(src) || (loadsFiles && (strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://")))
	if !viaMirror {
		return src, func() {}, nil
	}
	mr := f.opts.Node.Mirror()
	if mr == nil {
		return "", nil, fmt.Errorf("model %q: source %s needs the mirror; configure it with a mirror block in the llm app", m.Name, mirror.RedactURL(src))
	}
	fe, path, err := weights.ResolveSource(ctx, mr, m, f.logger)
	if err != nil {
		return "", nil, err
	}
	if loadsFiles && fe.Manifest.Format != "other" && !slices.Contains(formats, fe.Manifest.Format) {
		fe.Release()
		return "", nil, fmt.Errorf("model %q: engine %s cannot load %s weights (%s/%s); it loads %s", m.Name, m.Engine,
			fe.Manifest.Format, fe.Manifest.Model, fe.Manifest.Version, strings.Join(formats, " or "))
	}
	return path, fe.Release, nil
}
