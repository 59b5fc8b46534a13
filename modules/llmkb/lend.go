package llmkb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmgw/llmgw/modules/internal/userfiles"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// ReadUserFile lends a file of /v1/files to the handlers that take one
// by its id (llm_jobs' input files): only to the project that uploaded
// it, and not once it has expired.
func (s *service) ReadUserFile(ctx context.Context, project, id string) (string, []byte, error) {
	f, err := getFile(ctx, s.store, id)
	switch {
	case errors.Is(err, kbstore.ErrNotFound):
		return "", nil, userfiles.ErrNotFound
	case err != nil:
		return "", nil, fmt.Errorf("reading file %s: %w", id, err)
	case f.Owner != project || !f.ExpiresAt.IsZero() && time.Now().After(f.ExpiresAt):
		return "", nil, userfiles.ErrNotFound
	}
	data, err := s.blobs.GetBlob(ctx, f.ID)
	if err != nil {
		return "", nil, fmt.Errorf("reading the bytes of file %s: %w", id, err)
	}
	return f.Filename, data, nil
}

var _ userfiles.Reader = (*service)(nil)
