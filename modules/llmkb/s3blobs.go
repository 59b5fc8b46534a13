package llmkb

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llmkb/kbstore"
)

// blobPrefix is where the knowledge bases' files live in the mirror's
// stores, beside the weights.
const blobPrefix = "kb/files/"

// mirrorBlobs keeps the files' bytes in every store of the weights
// mirror (S3), checksummed; a read takes the first store that has them.
type mirrorBlobs struct{ stores []mirror.Store }

// PutBlob writes the bytes to every store.
func (m mirrorBlobs) PutBlob(ctx context.Context, id string, data []byte) error {
	sum := sha256.Sum256(data)
	for _, st := range m.stores {
		if _, err := st.Put(ctx, blobPrefix+id, bytes.NewReader(data), int64(len(data)), hex.EncodeToString(sum[:]), nil); err != nil {
			return fmt.Errorf("the mirror's store %s: %w", st.Name(), err)
		}
	}
	return nil
}

// GetBlob reads the bytes from the first store that has them.
func (m mirrorBlobs) GetBlob(ctx context.Context, id string) ([]byte, error) {
	var last error = kbstore.ErrNotFound
	for _, st := range m.stores {
		rc, err := st.Open(ctx, blobPrefix+id, 0)
		if err != nil {
			if !errors.Is(err, mirror.ErrNotFound) {
				last = fmt.Errorf("the mirror's store %s: %w", st.Name(), err)
			}
			continue
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err == nil {
			return data, nil
		}
		last = fmt.Errorf("the mirror's store %s: %w", st.Name(), err)
	}
	return nil, last
}

// DeleteBlob removes the bytes from every store.
func (m mirrorBlobs) DeleteBlob(ctx context.Context, id string) error {
	for _, st := range m.stores {
		if err := st.Delete(ctx, blobPrefix+id); err != nil {
			return fmt.Errorf("the mirror's store %s: %w", st.Name(), err)
		}
	}
	return nil
}
