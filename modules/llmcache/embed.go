package llmcache

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Batching of embedding calls: questions that miss at the same time share
// one /v1/embeddings request with several inputs. The first question of a
// batch waits up to embedBatchWait for others (or until embedBatchMax have
// come), then starts the call for all; no goroutine outlives a call.
const (
	embedBatchWait = 2 * time.Millisecond
	embedBatchMax  = 32
)

// batcher gathers concurrent embedding calls into batches.
type batcher struct {
	call    func(ctx context.Context, texts []string) ([][]float32, error)
	timeout time.Duration // bounds one call
	wait    time.Duration
	max     int

	mu      sync.Mutex
	pending *batch // the batch still taking inputs, or nil
}

type batch struct {
	inputs []string
	full   chan struct{} // closed when it takes no more inputs
	done   chan struct{} // closed when vecs and err are set
	vecs   [][]float32
	err    error
}

func newBatcher(call func(context.Context, []string) ([][]float32, error), timeout time.Duration) *batcher {
	return &batcher{call: call, timeout: timeout, wait: embedBatchWait, max: embedBatchMax}
}

// embed returns text's embedding, from a call it may share with other
// questions. The call itself is not cancelled when ctx is, since other
// questions wait for it; its own timeout bounds it.
func (b *batcher) embed(ctx context.Context, text string) ([]float32, error) {
	b.mu.Lock()
	bt, leader := b.pending, false
	if bt == nil {
		bt = &batch{full: make(chan struct{}), done: make(chan struct{})}
		b.pending, leader = bt, true
	}
	i := len(bt.inputs)
	for j, in := range bt.inputs { // the same question twice is embedded once
		if in == text {
			i = j
			break
		}
	}
	if i == len(bt.inputs) {
		bt.inputs = append(bt.inputs, text)
	}
	if len(bt.inputs) >= b.max && b.pending == bt {
		b.pending = nil
		close(bt.full)
	}
	b.mu.Unlock()
	if leader {
		t := time.NewTimer(b.wait)
		select {
		case <-bt.full:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		b.mu.Lock()
		if b.pending == bt {
			b.pending = nil
		}
		b.mu.Unlock() // bt.inputs no longer changes
		// The call runs apart, so that the leader, too, can give up waiting.
		go func() {
			defer close(bt.done)
			defer func() {
				if r := recover(); r != nil {
					bt.err = fmt.Errorf("embedding: %v", r)
				}
			}()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
			defer cancel()
			bt.vecs, bt.err = b.call(cctx, bt.inputs)
		}()
	}
	select {
	case <-bt.done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if bt.err != nil {
		return nil, bt.err
	}
	return slices.Clone(bt.vecs[i]), nil // callers normalize theirs in place
}
