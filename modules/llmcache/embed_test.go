package llmcache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestBatcherSharesCalls checks that concurrent questions share calls,
// each gets its own vector, and a batch never exceeds its size.
func TestBatcherSharesCalls(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	b := newBatcher(func(_ context.Context, texts []string) ([][]float32, error) {
		mu.Lock()
		sizes = append(sizes, len(texts))
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // a call takes time, as a model's does
		out := make([][]float32, len(texts))
		for i, s := range texts {
			var n float32
			fmt.Sscan(s, &n)
			out[i] = []float32{n}
		}
		return out, nil
	}, time.Second)
	b.wait = 50 * time.Millisecond // room for all goroutines to join on a busy machine
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			v, err := b.embed(context.Background(), fmt.Sprint(i%(n-2))) // two questions asked twice
			if err != nil || len(v) != 1 || v[0] != float32(i%(n-2)) {
				errs <- fmt.Errorf("question %d: %v %v", i, v, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := 0
	for _, s := range sizes {
		total += s
		if s > embedBatchMax {
			t.Errorf("a batch of %d inputs, more than %d", s, embedBatchMax)
		}
	}
	if len(sizes) >= n/2 || total > n {
		t.Errorf("%d questions took %d calls of %v inputs: want them batched", n, len(sizes), sizes)
	}
}

// TestBatcherErrorAndCancel checks that a failed call fails its batch
// and a cancelled question returns without waiting for the call.
func TestBatcherErrorAndCancel(t *testing.T) {
	release := make(chan struct{})
	b := newBatcher(func(context.Context, []string) ([][]float32, error) {
		<-release
		return nil, fmt.Errorf("model down")
	}, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { _, err := b.embed(ctx, "a"); done <- err }()
	other := make(chan error)
	go func() { _, err := b.embed(context.Background(), "b"); other <- err }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-done; err == nil {
		t.Error("a cancelled question got no error")
	}
	close(release)
	if err := <-other; err == nil || err.Error() != "model down" {
		t.Errorf("the call's error: %v", err)
	}
}
