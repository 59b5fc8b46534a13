package llmjobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

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

// stores are the mirror's stores the outputs go to (none without a
// mirror of S3 stores).
func (s *service) stores() outputStores {
	if app := s.app.Load(); app != nil {
		return outputStores(app.MirrorStores())
	}
	return nil
}

// storeOutputs copies a succeeded job's outputs from its folder to the
// mirror's stores; each one every store took leaves the folder. One no
// store took stays there: nothing is lost.
func (s *service) storeOutputs(ctx context.Context, id, dir string, files []outputFile) {
	st := s.stores()
	if len(st) == 0 {
		return
	}
	for i := range files {
		path := filepath.Join(dir, strconv.Itoa(files[i].Index))
		if err := st.put(ctx, id, files[i].Index, path); err != nil {
			s.logger.Warn("a job's output stays in the data directory: the mirror's stores did not take it", zap.String("job", id), zap.Error(err))
			continue
		}
		files[i].Store = "mirror"
		_ = os.Remove(path)
	}
}

// openOutput opens output o of job id, where it is kept.
func (s *service) openOutput(ctx context.Context, id string, o outputFile) (io.ReadCloser, error) {
	if o.Store == "mirror" {
		return s.stores().open(ctx, id, o.Index)
	}
	f, err := os.Open(filepath.Join(s.dir, id, "outputs", strconv.Itoa(o.Index)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, errors.New("it is no longer kept")
	}
	return f, err
}

// outputBytes reads output o of job id whole.
func (s *service) outputBytes(ctx context.Context, id string, o outputFile) ([]byte, error) {
	rc, err := s.openOutput(ctx, id, o)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// forgetOutputs removes the outputs of jobs past their retention from
// the mirror's stores.
func (s *service) forgetOutputs(gone []*job) {
	st := s.stores()
	for _, j := range gone {
		if len(st) == 0 || !slices.ContainsFunc(j.Outputs, func(o outputFile) bool { return o.Store == "mirror" }) {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
		if err := st.remove(ctx, j.ID, len(j.Outputs)); err != nil {
			s.logger.Warn("removing a job's outputs from the mirror's stores", zap.String("job", j.ID), zap.Error(err))
		}
		cancel()
	}
}
