package llmquota

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Redis store that fails to reach Redis is marked down: from then on
// every admission fails at once (the handler applies on_store_error in
// microseconds instead of waiting for dials and timeouts), settlements
// stay queued, and one probe (a PING) tries Redis every probeInterval.
// When a probe answers, the store is up again and the queue is sent.

// probeInterval is how often a store marked down tries Redis again.
const probeInterval = time.Second

var errStoreDown = errors.New("the quota store is unreachable")

// outage is why the store is down.
type outage struct {
	err error // errStoreDown wrapping the cause, made once
}

// isDown returns the outage's error, or nil while Redis answers.
func (s *redisStore) isDown() error {
	if o := s.down.Load(); o != nil {
		return o.err
	}
	return nil
}

// markDown marks the store down after err and starts the probe, unless
// it is already down.
func (s *redisStore) markDown(err error) {
	o := &outage{err: fmt.Errorf("%w: %w", errStoreDown, err)}
	if s.down.CompareAndSwap(nil, o) {
		go s.probe()
	}
}

// probe pings Redis every probeEvery until it answers, then marks the
// store up and wakes the sender to send what is queued.
func (s *redisStore) probe() {
	t := time.NewTicker(s.probeEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		if s.down.Load() == nil {
			return // a read of usage found Redis first
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.probeEvery)
		err := s.client.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.markUp()
			return
		}
	}
}

// markUp ends an outage, if any, and wakes the sender to send the
// queued settlements. The probe then stops at its next tick.
func (s *redisStore) markUp() {
	if s.down.Load() != nil {
		s.down.Store(nil)
		s.wake()
	}
}

// failWaiting answers every waiting admission with the outage's error.
func (s *redisStore) failWaiting(err error) {
	s.mu.Lock()
	ws := s.waiting
	s.waiting = nil
	s.mu.Unlock()
	for _, w := range ws {
		w.err = err
		close(w.done)
	}
}

// unreachable says whether an error means Redis cannot serve: no
// connection, a timeout, or a server that is loading, read-only or
// without its master. A script's own error does not.
func unreachable(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return !errors.Is(err, context.Canceled)
	}
	for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "BUSY"} {
		if strings.HasPrefix(re.Error(), p) {
			return true
		}
	}
	return false
}
