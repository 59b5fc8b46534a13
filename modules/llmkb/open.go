package llmkb

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/boltstore"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/dirblobs"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore/pgstore"
)

// openStore opens the embedded store in the data directory, with the
// files' bytes beside it; with a dsn, PostgreSQL keeps both, so that
// every node of a cluster reads a file uploaded through any other.
func openStore(ctx context.Context, dsn string) (kbstore.Store, kbstore.Blobs, error) {
	if dsn != "" {
		st, err := pgstore.Open(ctx, dsn)
		if err != nil {
			return nil, nil, err
		}
		return st, st, nil
	}
	dir := filepath.Join(caddy.AppDataDir(), "llm", "kb")
	blobs, err := dirblobs.Open(filepath.Join(dir, "files"))
	if err != nil {
		return nil, nil, fmt.Errorf("the knowledge bases' files in %s: %w", dir, err)
	}
	st, err := boltstore.Open(filepath.Join(dir, "kb.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("the knowledge bases' store in %s: %w", dir, err)
	}
	return st, blobs, nil
}
