package weights

import (
	"slices"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// AdaptersNeedMirror says whether an adapter of the models comes through
// the mirror.
func AdaptersNeedMirror(models []*catalog.Model) bool {
	for _, m := range models {
		for _, a := range m.Adapters {
			if ViaMirror(a.Source) {
				return true
			}
		}
	}
	return false
}

// ViaMirror tells whether an adapter's source goes through the mirror.
func ViaMirror(src string) bool {
	return IsMirrorSource(src) || strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://")
}

// WithAdapterSources is models and, for each adapter, an entry with the
// adapter's name and source: what uses a file of the node's weights
// directory.
func WithAdapterSources(models []*catalog.Model) []*catalog.Model {
	out := models
	for _, m := range models {
		for _, a := range m.Adapters {
			if len(out) == len(models) {
				out = slices.Clone(models)
			}
			out = append(out, &catalog.Model{Name: a.Name, Source: a.Source})
		}
	}
	return out
}
