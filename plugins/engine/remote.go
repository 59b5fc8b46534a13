package engine

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Remote keeps the replicas of an engine that runs no process: an outside
// provider's endpoint is the replica. Embed it for Status, Adopt and
// Stop; Start calls Add, or Watch to have the provider probed. The zero
// value is ready to use.
type Remote struct {
	// Client sends the probes; nil: a client of its own.
	Client *http.Client
	// Now is the clock that says when a probe is due; nil: time.Now.
	Now func() time.Time

	mu       sync.Mutex
	replicas map[string]*remoteReplica
}

// remoteReplica is one provider endpoint and what its last probe found.
type remoteReplica struct {
	probe Probe
	last  ProbeResult
	busy  bool // a probe is under way
}

// Add records a started replica that is not probed: Status reports it
// ready, and the gateway learns of its failures from its requests.
func (e *Remote) Add(id string) { e.add(id, Probe{Interval: -1}) }

// Watch records a started replica that Status probes every p.Interval.
func (e *Remote) Watch(id string, p Probe) { e.add(id, p) }

func (e *Remote) add(id string, p Probe) {
	if p.Interval == 0 {
		p.Interval = DefaultProbeInterval
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.replicas == nil {
		e.replicas = map[string]*remoteReplica{}
	}
	e.replicas[id] = &remoteReplica{probe: p}
}

// Status reports a provider as the last probe found it, probing it first
// when the last probe is older than its interval: StateFailing with the
// reason while it does not answer, refuses the key or fails.
func (e *Remote) Status(ctx context.Context, id string) (Status, error) {
	e.mu.Lock()
	r, ok := e.replicas[id]
	if !ok {
		e.mu.Unlock()
		return Status{}, ErrUnknownReplica
	}
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	due := r.probe.Interval > 0 && !r.busy && (r.last.At.IsZero() || now().Sub(r.last.At) >= r.probe.Interval)
	if due {
		r.busy = true
	}
	e.mu.Unlock()
	if due {
		res := r.probe.Check(ctx, e.Client)
		res.At = now()
		e.mu.Lock()
		r.busy = false
		if ctx.Err() == nil { // a cancelled Status tells nothing of the provider
			r.last = res
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if r.last.State == StateFailing {
		return Status{State: StateFailing, Message: r.last.Reason}, nil
	}
	return Status{State: StateReady}, nil
}

// Adopt takes back a replica (the provider's endpoint) after the plugin
// restarted; it is probed at the default interval.
func (e *Remote) Adopt(_ context.Context, r Replica) error {
	e.Watch(r.ID, ProbeFor(r, 0))
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
