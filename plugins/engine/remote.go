package engine

import (
	"context"
	"sync"
	"time"
)

// Remote keeps the replicas of an engine that runs no process: an outside
// provider's endpoint is the replica. Embed it for Status, Adopt and
// Stop; Start calls Add. The zero value is ready to use.
type Remote struct {
	mu       sync.Mutex
	replicas map[string]struct{}
}

// Add records a started replica.
func (e *Remote) Add(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.replicas == nil {
		e.replicas = map[string]struct{}{}
	}
	e.replicas[id] = struct{}{}
}

// Status reports a provider as ready; the gateway learns of its failures
// from the requests it sends.
func (e *Remote) Status(_ context.Context, id string) (Status, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.replicas[id]; !ok {
		return Status{}, ErrUnknownReplica
	}
	return Status{State: StateReady}, nil
}

// Adopt takes back a replica (the provider's endpoint) after the plugin
// restarted.
func (e *Remote) Adopt(_ context.Context, r Replica) error {
	e.Add(r.ID)
	return nil
}

// Stop forgets a replica.
func (e *Remote) Stop(_ context.Context, id string, _ time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.replicas[id]; !ok {
		return ErrUnknownReplica
	}
	delete(e.replicas, id)
	return nil
}
