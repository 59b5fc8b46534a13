package llmjobs

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/tenancy"
)

func levels(key, project tenancy.Limits) []tenancy.Level {
	return []tenancy.Level{tenancy.NewLevel("key", "k1", key), tenancy.NewLevel("project", "acme/web/site", project)}
}

// jobs_per_day and gpu_seconds_per_day refuse at the level that is full,
// naming it and when it renews; a new UTC day starts afresh; the counts
// are written to the directory and read back.
func TestUsageAdmit(t *testing.T) {
	dir := t.TempDir()
	u := openUsage(dir, zap.NewNop())
	day := time.Date(2026, 3, 4, 18, 30, 0, 0, time.UTC)
	lv := levels(tenancy.Limits{}, tenancy.Limits{JobsPerDay: 2, GPUSecondsPerDay: 100})
	for i := range 2 {
		if d, no := u.admit(lv, day); no != nil || d != "2026-03-04" {
			t.Fatalf("job %d: %v %q", i, no, d)
		}
	}
	_, no := u.admit(lv, day)
	if no == nil {
		t.Fatal("a third job of a project with jobs_per_day 2 was admitted")
	}
	if got, want := no.Error(), "the project acme/web/site has used its 2 jobs per day (jobs_per_day); it renews in 5h30m0s (at 00:00 UTC)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if e := no.apiError(); e.Status != 429 || e.Code != "job_quota_exceeded" || e.RetryAfter != 5*time.Hour+30*time.Minute {
		t.Errorf("the API's error: %+v", e)
	}
	// A cancelled job gives its count back: one more fits.
	u.giveBack([]string{"key:k1", "project:acme/web/site"}, "2026-03-04")
	if _, no := u.admit(lv, day); no != nil {
		t.Errorf("after a job was given back: %v", no)
	}
	// GPU seconds: below the limit a job is admitted, at it not.
	lv = levels(tenancy.Limits{GPUSecondsPerDay: 100}, tenancy.Limits{})
	u.charge([]string{"key:k1"}, 99.5, day)
	if _, no := u.admit(lv, day); no != nil {
		t.Errorf("99.5 of 100 GPU seconds: %v", no)
	}
	u.charge([]string{"key:k1"}, 1, day)
	if _, no := u.admit(lv, day); no == nil || !strings.Contains(no.Error(), "the key k1 has used 100.5 of its 100 GPU seconds per day") {
		t.Errorf("100.5 of 100 GPU seconds: %v", no)
	}
	u.write()
	again := openUsage(dir, zap.NewNop())
	if got := again.used("key:k1", day); got.Jobs != 3 || got.GPUSeconds != 100.5 {
		t.Errorf("read back: %+v, want 3 jobs and 100.5 GPU seconds", got)
	}
	// The next UTC day starts afresh.
	if got := again.used("key:k1", day.Add(6*time.Hour)); got != (levelUse{}) {
		t.Errorf("the next day: %+v", got)
	}
	if _, no := again.admit(lv, day.Add(6*time.Hour)); no != nil {
		t.Errorf("the next day: %v", no)
	}
}

// The writer saves the counters in the background and once more when
// the service stops; a new service reads them.
func TestUsageSurvivesTheService(t *testing.T) {
	dir := t.TempDir()
	s, err := openService(dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	lv := levels(tenancy.Limits{}, tenancy.Limits{JobsPerDay: 1})
	if _, no := s.usage.admit(lv, time.Now()); no != nil {
		t.Fatal(no)
	}
	_ = s.Destruct()
	s, err = openService(dir, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destruct()
	if _, no := s.usage.admit(lv, time.Now()); no == nil {
		t.Error("the day's count was lost when the service stopped")
	}
}

// A project at its concurrent_jobs keeps its jobs queued while another
// project's pass them; when one of its jobs ends, it has its turn again
// (before the other, served since).
func TestQueueConcurrentJobs(t *testing.T) {
	s := queueOf(t, [2]string{"a", "normal"}, [2]string{"a", "normal"}, [2]string{"a", "normal"},
		[2]string{"b", "normal"}, [2]string{"b", "normal"})
	s.mu.Lock()
	for _, j := range s.jobs {
		j.Levels = []jobLevel{{Kind: "project", Name: j.Owner}}
		if j.Owner == "a" {
			j.Levels[0].ConcurrentJobs = 1
		}
	}
	s.mu.Unlock()
	var ran []*job
	for j := s.next("m", rep); j != nil; j = s.next("m", rep) {
		ran = append(ran, j)
	}
	if got, want := ids(ran), "[j0 j3 j4]"; got != want {
		t.Fatalf("with a at its concurrent_jobs: got %s, want %s", got, want)
	}
	if s.hasRunnable("m") {
		t.Error("the model has a runnable job while a's are held back")
	}
	s.mu.Lock()
	v := s.viewLocked(s.jobs["j1"])
	s.mu.Unlock()
	if v.State != stateQueued || !strings.Contains(v.Waiting, "the project a runs 1 jobs, its concurrent_jobs") {
		t.Errorf("a held-back job shows %q %q", v.State, v.Waiting)
	}
	s.mu.Lock()
	s.endedLocked(ran[0])
	s.mu.Unlock()
	if j := s.next("m", &fleet.Replica{ID: "r", GPUs: []int{0, 1}}); j == nil || j.ID != "j1" || j.gpus != 2 {
		t.Fatalf("after a's job ended: %v", j)
	}
	if j := s.next("m", rep); j != nil {
		t.Errorf("a's third job ran beside its second: %s", j.ID)
	}
}

func ids(js []*job) string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return fmt.Sprint(out)
}

// A job ending charges its seconds times its replica's GPUs to its
// levels; a job cancelled while queued gives its count back.
func TestJobChargesAndGivesBack(t *testing.T) {
	s := queueOf(t, [2]string{"a", "normal"}, [2]string{"a", "normal"})
	lv := levels(tenancy.Limits{}, tenancy.Limits{JobsPerDay: 5})
	for _, id := range []string{"j0", "j1"} {
		day, no := s.usage.admit(lv, time.Now())
		if no != nil {
			t.Fatal(no)
		}
		s.mu.Lock()
		s.jobs[id].Levels, s.jobs[id].QuotaDay = []jobLevel{{Kind: "key", Name: "k1"}, {Kind: "project", Name: "acme/web/site"}}, day
		s.mu.Unlock()
	}
	j := s.next("m", &fleet.Replica{ID: "r", GPUs: []int{0, 1, 2}})
	s.mu.Lock()
	j.started = time.Now().Add(-2 * time.Second)
	s.endedLocked(j)
	s.mu.Unlock()
	if _, ok := s.cancel("j1"); !ok {
		t.Fatal("cancelling the queued job")
	}
	got := s.usage.used("project:acme/web/site", time.Now())
	if got.Jobs != 1 || got.GPUSeconds < 6 || got.GPUSeconds > 7 {
		t.Errorf("got %+v, want 1 job (the cancelled one given back) and about 6 GPU seconds (2 s × 3 GPUs)", got)
	}
}

// projectTenants stands in for the app's tenancy after a reload.
type projectTenants map[string]*tenancy.Tenant

func (p projectTenants) ProjectTenant(project string) (*tenancy.Tenant, bool) {
	t, ok := p[project]
	return t, ok
}

// A reload gives queued jobs their project's new concurrent_jobs; a
// key's own stays as it was.
func TestRelimitOnReload(t *testing.T) {
	s := queueOf(t, [2]string{"acme/web/site", "normal"})
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs["j0"]
	j.Levels = []jobLevel{{Kind: "key", Name: "k1", ConcurrentJobs: 3}, {Kind: "project", Name: "acme/web/site", ConcurrentJobs: 1}}
	s.relimitLocked(projectTenants{"acme/web/site": {Levels: []tenancy.Level{tenancy.NewLevel("project", "acme/web/site", tenancy.Limits{ConcurrentJobs: 4})}}})
	if j.Levels[0].ConcurrentJobs != 3 || j.Levels[1].ConcurrentJobs != 4 {
		t.Errorf("got %+v, want the key's 3 and the project's new 4", j.Levels)
	}
}
