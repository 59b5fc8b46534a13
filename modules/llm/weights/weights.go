package weights

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"go.uber.org/zap"
)

// trackedMirrorModel is the mirror model a catalog model's replicas
// follow when its source is a registry repository or a mirror model
// without a version; ok is false for other sources.
func TrackedModel(m *catalog.Model) (string, bool) {
	if strings.HasPrefix(m.Source, "hf://") {
		return mirror.NameFor(m.Name), true
	}
	if rest, ok := strings.CutPrefix(m.Source, "mirror://"); ok && rest != "" && !strings.Contains(rest, "/") {
		return rest, true
	}
	return "", false
}

// weightsUse is what the catalog uses of the mirror: versions by id
// (model/version) and mirror models of which every version counts.
type Use struct {
	IDs   map[string][]string // model/version → catalog models
	Whole map[string][]string // mirror model → catalog models
	Why   map[string]string   // mirror model → why every version counts
}

// Keep tells whether a catalog model uses the mirror version.
func (u Use) Keep(model, version string) bool {
	return len(u.IDs[model+"/"+version]) > 0 || len(u.Whole[model]) > 0
}

// Open builds the mirror c describes, or takes the one an earlier config
// with the same mirror block built (mirrors live in a pool across
// reloads), and starts its reconciliation between stores. key is what
// Close takes when the config that opened it stops.
func Open(c *MirrorConfig, dataDir string, logger *zap.Logger) (*mirror.Mirror, string, error) {
	cfg := c.WithDefaults(dataDir)
	b, _ := json.Marshal(cfg)
	key := "mirror:" + string(b)
	val, _, err := mirrors.LoadOrNew(key, func() (caddy.Destructor, error) {
		m, err := NewMirror(c, dataDir, logger)
		if err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		if len(cfg.Stores) > 1 {
			go m.Run(ctx, time.Duration(cfg.SyncInterval), max(cfg.VerifyEvery, 0))
		}
		return &mirrorHandle{m: m, cancel: cancel}, nil
	})
	if err != nil {
		return nil, "", err
	}
	return val.(*mirrorHandle).m, key, nil
}

// Close lets go of the mirror Open gave under key; the last user's close
// stops it.
func Close(key string) { _, _ = mirrors.Delete(key) }

// SourceErrorf is a SourceError with the message format gives.
func SourceErrorf(format string, args ...any) error { return sourceErr(format, args...) }

// Interface guards
var _ caddy.Destructor = (*mirrorHandle)(nil)

// MirrorRef is the mirror model (and version, if pinned) a catalog
// model's weights come from, or ok false when they do not come through the
// mirror.
func MirrorRef(m *catalog.Model) (model, version string, ok bool) {
	if rest, found := strings.CutPrefix(m.Source, "mirror://"); found {
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) > 1 {
			version = parts[1]
		}
		return parts[0], version, true
	}
	if strings.HasPrefix(m.Source, "hf://") || strings.HasPrefix(m.Source, "http://") || strings.HasPrefix(m.Source, "https://") {
		return mirror.NameFor(m.Name), "", true
	}
	return "", "", false
}

// DefaultUpdateCheck is how often the registry is asked by default.
const DefaultUpdateCheck = 6 * time.Hour
