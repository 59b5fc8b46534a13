package llmjobs

import (
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

// jobLevel is a level of the tenancy of the key that made a job, as the
// job keeps it: its concurrent_jobs as they were when it was submitted.
type jobLevel struct {
	Kind           string `json:"kind"`
	Name           string `json:"name"`
	ConcurrentJobs int64  `json:"concurrent_jobs,omitempty"`
}

func (l jobLevel) key() string { return levelKey(l.Kind, l.Name) }

// levelsOf are a tenant's levels, from the key up, as a job keeps them.
func levelsOf(t *tenancy.Tenant) []jobLevel {
	out := make([]jobLevel, len(t.Levels))
	for i, l := range t.Levels {
		out[i] = jobLevel{Kind: l.Kind, Name: l.Name, ConcurrentJobs: l.Limits.ConcurrentJobs}
	}
	return out
}

// levelKeys are the counters' keys of a job's levels.
func levelKeys(j *job) []string {
	out := make([]string, len(j.Levels))
	for i, l := range j.Levels {
		out[i] = l.key()
	}
	return out
}

// admit counts a new job at its tenant's levels, unless one is at its
// jobs_per_day or gpu_seconds_per_day: then it answers 429 naming the
// level, with Retry-After, and returns false. (queue calls it; a job
// not queued after all gives its count back.)
func (h *Jobs) admit(w http.ResponseWriter, r *http.Request, j *job) bool {
	t, ok := tenancy.TenantOf(r)
	if !ok {
		return true
	}
	j.Levels = levelsOf(t)
	day, refused := h.svc.usage.admit(t.Levels, time.Now())
	if refused != nil {
		h.logger.Info("job quota exceeded", zap.String("level", refused.level.Kind+" "+refused.level.Name),
			zap.String("key", t.KeyID), zap.String("model", j.Model))
		metricRefused.WithLabelValues("job_quota_exceeded").Inc()
		refused.apiError().WriteFor(w, r)
		return false
	}
	j.QuotaDay = day
	return true
}

// cappedLocked is the first of the job's levels that runs as many jobs
// as its concurrent_jobs, or nil.
func (s *service) cappedLocked(j *job) *jobLevel {
	for i, l := range j.Levels {
		if l.ConcurrentJobs > 0 && s.running[l.key()] >= l.ConcurrentJobs {
			return &j.Levels[i]
		}
	}
	return nil
}

// waitingLocked says why a queued job is held back, or "".
func (s *service) waitingLocked(j *job) string {
	l := s.cappedLocked(j)
	if l == nil {
		return ""
	}
	return fmt.Sprintf("the %s %s runs %d jobs, its concurrent_jobs; this job waits for one of them to end (jobs of others may pass it meanwhile)",
		l.Kind, l.Name, s.running[l.key()])
}

// startedLocked counts a job that starts on rep at its levels.
func (s *service) startedLocked(j *job, rep *fleet.Replica) {
	j.started, j.gpus = time.Now(), max(1, len(rep.GPUs))
	for _, l := range j.Levels {
		s.running[l.key()]++
	}
}

// endedLocked uncounts a job that has stopped running, charges its GPU
// seconds to its levels, and wakes the dispatchers of the models with
// jobs waiting (one may have waited for this job's concurrent_jobs).
func (s *service) endedLocked(j *job) {
	for _, l := range j.Levels {
		k := l.key()
		if s.running[k]--; s.running[k] <= 0 {
			delete(s.running, k)
		}
	}
	if !j.started.IsZero() {
		s.usage.charge(levelKeys(j), time.Since(j.started).Seconds()*float64(j.gpus), time.Now())
		j.started = time.Time{}
	}
	if len(j.Levels) == 0 {
		return
	}
	for m, q := range s.queues {
		if len(q) > 0 {
			s.kickLocked(m)
		}
	}
}

// relimitLocked gives the queued jobs the concurrent_jobs their
// project, team and organisation have in app's config (a key's own stays
// as it was when the job was queued).
func (s *service) relimitLocked(app interface {
	ProjectTenant(string) (*tenancy.Tenant, bool)
}) {
	tenants := map[string]*tenancy.Tenant{}
	for _, q := range s.queues {
		for _, j := range q {
			t, seen := tenants[j.Owner]
			if !seen && j.Owner != "" {
				t, _ = app.ProjectTenant(j.Owner)
				tenants[j.Owner] = t
			}
			if t == nil {
				continue
			}
			for i, l := range j.Levels {
				for _, now := range t.Levels {
					if now.Kind == l.Kind && now.Name == l.Name {
						j.Levels[i].ConcurrentJobs = now.Limits.ConcurrentJobs
					}
				}
			}
		}
	}
}

// unranLocked gives back the jobs_per_day count of a job that ended
// without having run (cancelled while queued, or its model gone).
func (s *service) unranLocked(j *job) {
	if j.Attempts == 0 {
		s.usage.giveBack(levelKeys(j), j.QuotaDay)
	}
}
