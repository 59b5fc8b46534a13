package llmjobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/llmgw/llmgw/mirror"
)

// outputPrefix is where the jobs' outputs live in the mirror's stores,
// beside the weights: jobs/outputs/<job id>/<n>.
const outputPrefix = "jobs/outputs/"

// outputStores keeps the jobs' outputs in every store of the weights
// mirror (S3), checksummed; a read takes the first store that has one.
// Without stores the outputs stay in the data directory.
type outputStores []mirror.Store

func outputKey(id string, n int) string { return outputPrefix + id + "/" + strconv.Itoa(n) }

// put copies the output file at path to every store.
func (s outputStores) put(ctx context.Context, id string, n int, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	for _, store := range s {
		if _, err := store.Put(ctx, outputKey(id, n), f, st.Size(), sum, nil); err != nil {
			return fmt.Errorf("the mirror's store %s: %w", store.Name(), err)
		}
	}
	return nil
}

// open reads an output from the first store that has it.
func (s outputStores) open(ctx context.Context, id string, n int) (io.ReadCloser, error) {
	last := fmt.Errorf("output %d of job %s is in none of the mirror's stores", n, id)
	for _, store := range s {
		rc, err := store.Open(ctx, outputKey(id, n), 0)
		if err == nil {
			return rc, nil
		}
		if !errors.Is(err, mirror.ErrNotFound) {
			last = fmt.Errorf("the mirror's store %s: %w", store.Name(), err)
		}
	}
	return nil, last
}

// remove deletes a job's outputs from every store.
func (s outputStores) remove(ctx context.Context, id string, count int) error {
	var errs []error
	for _, store := range s {
		for n := range count {
			if err := store.Delete(ctx, outputKey(id, n)); err != nil {
				errs = append(errs, fmt.Errorf("the mirror's store %s: %w", store.Name(), err))
				break
			}
		}
	}
	return errors.Join(errs...)
}
