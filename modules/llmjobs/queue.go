package llmjobs

import (
	"sort"
)

// enqueue queues a new job, unless its model's queue is full.
func (s *service) enqueue(j *job) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queues[j.Model]) >= s.maxQueued {
		return false
	}
	s.seq++
	j.seq = s.seq
	s.jobs[j.ID] = j
	s.queues[j.Model] = append(s.queues[j.Model], j)
	s.save(j)
	s.kickLocked(j.Model)
	return true
}

// lookup is job id when owner may see it.
func (s *service) lookup(id, owner string) *job {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil || j.Owner != owner {
		return nil
	}
	return j
}

// view is job id as the API shows it: without its workflow, with its
// place in its model's queue.
func (s *service) view(id string) job {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.viewLocked(s.jobs[id])
}

func (s *service) viewLocked(j *job) job {
	if j == nil {
		return job{}
	}
	v := *j
	v.Workflow, v.cancel, v.ctx, v.Levels, v.QuotaDay = nil, nil, nil, nil, ""
	if j.Node != nil {
		n := *j.Node
		v.Node = &n
	}
	v.Outputs = append([]outputFile{}, j.Outputs...)
	if j.State == stateQueued {
		pos := 0
		for _, o := range s.queues[j.Model] {
			if o != j && s.beforeLocked(j.Model, o, j) {
				pos++
			}
		}
		v.QueuePosition = &pos
		v.Waiting = s.waitingLocked(j)
	}
	return v
}

// listFor is owner's newest jobs, at most limit.
func (s *service) listFor(owner string, limit int) []job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var mine []*job
	for _, j := range s.jobs {
		if j.Owner == owner {
			mine = append(mine, j)
		}
	}
	sort.Slice(mine, func(a, b int) bool { return mine[a].seq > mine[b].seq })
	out := make([]job, 0, min(limit, len(mine)))
	for _, j := range mine[:min(limit, len(mine))] {
		out = append(out, s.viewLocked(j))
	}
	return out
}

// cancel ends job id: a queued job leaves its queue at once; a running
// one is interrupted and ends cancelled when its replica has stopped it.
// It reports the state and false when the job had already finished.
func (s *service) cancel(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return "been removed", false
	}
	switch j.State {
	case stateQueued:
		q := s.queues[j.Model]
		for i, o := range q {
			if o == j {
				s.queues[j.Model] = append(q[:i:i], q[i+1:]...)
				break
			}
		}
		s.finishLocked(j, stateCancelled, nil)
		s.unranLocked(j)
	case stateRunning:
		j.stopped = true
		j.cancel()
	default:
		return j.State, false
	}
	return j.State, true
}

// classOf is the class of node id of the job's workflow.
func classOf(j *job, id string) string { return j.classes[id] }
