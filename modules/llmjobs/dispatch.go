package llmjobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
)

// kickLocked wakes the model's dispatcher, starting it when it has none.
func (s *service) kickLocked(model string) {
	ch, ok := s.wake[model]
	if !ok {
		ch = make(chan struct{}, 1)
		s.wake[model] = ch
		s.done.Add(1)
		go s.dispatch(model, ch)
	}
	select {
	case ch <- struct{}{}:
	default:
	}
}

// idle selects a ready replica that runs no job: a workflow server runs
// one at a time, so each replica takes one job.
type idle struct{}

func (idle) Select(ready []*fleet.Replica) *fleet.Replica {
	for _, r := range ready {
		if r.Inflight() == 0 {
			return r
		}
	}
	return nil
}

// errNoApp is why a dispatcher waits before the service has its app.
var errNoApp = errors.New("the jobs have no llm app yet")

// dispatch runs the model's queued jobs on its idle replicas, each job
// on one replica, until the service stops.
func (s *service) dispatch(model string, wake chan struct{}) {
	defer s.done.Done()
	for {
		if !s.hasRunnable(model) {
			select {
			case <-s.ctx.Done():
				return
			case <-wake:
			}
			continue
		}
		app := s.app.Load()
		var rep *fleet.Replica
		var release func()
		err := errNoApp
		if app != nil { // nil until a handler hands the service its app
			actx, cancel := context.WithTimeout(s.ctx, 250*time.Millisecond)
			rep, release, err = app.Reacquire(actx, model, idle{}, s.failedReplica(model))
			cancel()
		}
		var unknown *catalog.UnknownModelError
		switch {
		case s.ctx.Err() != nil:
			if err == nil {
				release()
			}
			return
		case errors.As(err, &unknown):
			s.failQueued(model, "model_not_found", fmt.Sprintf("the model %s is no longer in the catalog", model))
			continue
		case err != nil:
			select { // no idle replica yet: a job's end or a new job wakes us
			case <-s.ctx.Done():
				return
			case <-wake:
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		j := s.next(model, rep)
		if j == nil {
			release()
			continue
		}
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			s.run(j, rep, release)
			s.mu.Lock()
			s.kickLocked(model)
			s.mu.Unlock()
		}()
	}
}

// failedReplica is the model's replica a job failed on last, which
// gets no job until its fleet has checked it.
func (s *service) failedReplica(model string) *fleet.Replica {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed[model]
}

// hasRunnable tells whether the model has a queued job that may start:
// one whose tenant's levels are all below their concurrent_jobs.
func (s *service) hasRunnable(model string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.queues[model] {
		if s.cappedLocked(j) == nil {
			return true
		}
	}
	return false
}

// next takes the model's next job off its queue and marks it running on
// rep: the highest priority first; among those, the owner served
// longest ago; the owner's oldest job. A job whose tenant runs its
// concurrent_jobs is passed over (it keeps its place and its owner's
// turn), so that other tenants' jobs run meanwhile.
func (s *service) next(model string, rep *fleet.Replica) *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[model]
	best := -1
	for i, j := range q {
		if s.cappedLocked(j) != nil {
			continue
		}
		if best < 0 || s.beforeLocked(model, j, q[best]) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	j := q[best]
	s.queues[model] = append(q[:best:best], q[best+1:]...)
	if s.turns[model] == nil {
		s.turns[model] = map[string]int64{}
	}
	s.seq++
	s.turns[model][j.Owner] = s.seq
	j.ctx, j.cancel = context.WithCancel(s.ctx)
	j.State, j.StartedAt, j.Replica = stateRunning, time.Now().Unix(), rep.ID
	j.Attempts++
	s.startedLocked(j, rep)
	s.save(j)
	s.changedLocked(j)
	return j
}

// beforeLocked tells whether job a goes before job b.
func (s *service) beforeLocked(model string, a, b *job) bool {
	if pa, pb := priorities[a.Priority], priorities[b.Priority]; pa != pb {
		return pa > pb
	}
	if a.Owner != b.Owner {
		ta, tb := s.turns[model][a.Owner], s.turns[model][b.Owner]
		if ta != tb {
			return ta < tb
		}
	}
	return a.seq < b.seq
}

// failQueued fails every queued job of model.
func (s *service) failQueued(model, code, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, j := range s.queues[model] {
		s.finishLocked(j, stateFailed, &jobError{Code: code, Message: msg})
		s.unranLocked(j)
	}
	delete(s.queues, model)
}

// finishLocked ends a job in state, with why when it failed.
func (s *service) finishLocked(j *job, state string, why *jobError) {
	j.State, j.Error, j.FinishedAt, j.Node = state, why, time.Now().Unix(), nil
	metricFinished.WithLabelValues(j.Model, state).Inc()
	if j.StartedAt > 0 {
		metricRunSeconds.WithLabelValues(j.Model).Observe(float64(j.FinishedAt - j.StartedAt))
	}
	j.preview = nil // its pictures are drawn: previews are no longer kept
	if state == stateSucceeded {
		j.Progress = 1
	}
	s.save(j)
	s.changedLocked(j)
}
