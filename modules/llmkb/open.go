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

// openStore opens the embedded store in the data directory (PostgreSQL
// at dsn when given); the files' bytes go to the data directory.
func openStore(ctx context.Context, dsn string) (kbstore.Store, kbstore.Blobs, error) {
	dir := filepath.Join(caddy.AppDataDir(), "llm", "kb")
	blobs, err := dirblobs.Open(filepath.Join(dir, "files"))
	if err != nil {
		return nil, nil, fmt.Errorf("the knowledge bases' files in %s: %w", dir, err)
	}
	if dsn != "" {
		return openPostgres(ctx, dsn, blobs)
	}
	st, err := boltstore.Open(filepath.Join(dir, "kb.db"))
	if err != nil {
		return nil, nil, fmt.Errorf("the knowledge bases' store in %s: %w", dir, err)
	}
	return st, blobs, nil
}

// openPostgres opens the store shared by a cluster.
func openPostgres(ctx context.Context, dsn string, blobs kbstore.Blobs) (kbstore.Store, kbstore.Blobs, error) {
	st, err := pgstore.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	return st, blobs, nil
}
