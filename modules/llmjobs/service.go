package llmjobs

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llmjobs/comfy"
)

// Job states.
const (
	stateQueued    = "queued"
	stateRunning   = "running"
	stateSucceeded = "succeeded"
	stateFailed    = "failed"
	stateCancelled = "cancelled"
)

// priorities, highest first.
var priorities = map[string]int{"high": 2, "normal": 1, "low": 0}

// job is one job as it is kept: the API's fields and the workflow.
type job struct {
	ID         string   `json:"id"`
	Object     string   `json:"object"`
	Model      string   `json:"model"`
	State      string   `json:"state"`
	Priority   string   `json:"priority"`
	Owner      string   `json:"owner,omitempty"` // the project of the key that made it
	CreatedAt  int64    `json:"created_at"`
	StartedAt  int64    `json:"started_at,omitempty"`
	FinishedAt int64    `json:"finished_at,omitempty"`
	Progress   float64  `json:"progress"`
	Node       *nodeRef `json:"node,omitempty"`
	// QueuePosition is, for a queued job, how many of its model's jobs go
	// before it (shown, not kept).
	QueuePosition *int              `json:"queue_position,omitempty"`
	Replica       string            `json:"replica,omitempty"`
	Error         *jobError         `json:"error,omitempty"`
	Outputs       []outputFile      `json:"outputs"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	// Idempotent jobs are run again, on another replica, when the one
	// running them fails (up to 3 tries); Attempts counts the tries.
	Idempotent bool            `json:"idempotent,omitempty"`
	Attempts   int             `json:"attempts,omitempty"`
	Workflow   json.RawMessage `json:"workflow,omitempty"`
	// Inputs are the files the workflow loads, kept in the job's folder
	// (inputs/<name>) and uploaded to the replica that runs it.
	Inputs []inputFile `json:"inputs,omitempty"`
	// Waiting says why a queued job waits though a replica may be free:
	// a level of its tenant runs its concurrent_jobs (shown, not kept).
	Waiting string `json:"waiting,omitempty"`
	// Levels are the tenancy levels of the key that made the job, with
	// their concurrent_jobs, and QuotaDay the UTC day its jobs_per_day
	// counted (kept, not shown).
	Levels   []jobLevel `json:"levels,omitempty"`
	QuotaDay string     `json:"quota_day,omitempty"`

	classes  map[string]string  // node id → class_type
	seq      int64              // order of submission
	ctx      context.Context    // a running job's: done when it must stop
	cancel   context.CancelFunc // ends ctx
	stopped  bool               // cancelled by its owner while it ran
	preview  *comfy.Preview     // a running job's latest preview picture
	previews int                // how many it has had
	started  time.Time          // when it started running, for its GPU seconds
	gpus     int                // the GPUs of the replica running it (at least 1)
}

// nodeRef is the node of the workflow a running job is at.
type nodeRef struct {
	ID        string `json:"id"`
	ClassType string `json:"class_type,omitempty"`
	Step      int    `json:"step,omitempty"`
	Steps     int    `json:"steps,omitempty"`
}

// jobError is why a job failed.
type jobError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// outputFile is one file a job wrote, kept with the job.
type outputFile struct {
	Index       int    `json:"index"`
	Node        string `json:"node"`
	Kind        string `json:"kind"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	URL         string `json:"url"`
	// Store is "mirror" for an output kept in the mirror's stores, else
	// empty (in the data directory).
	Store string `json:"store,omitempty"`
}

func (j job) finished() bool {
	return j.State == stateSucceeded || j.State == stateFailed || j.State == stateCancelled
}

// service keeps the jobs of every llm_jobs handler of the process: one
// per data directory, shared across reloads.
type service struct {
	dir    string
	logger *zap.Logger
	app    atomic.Pointer[llm.App]
	ctx    context.Context
	stop   context.CancelFunc
	done   sync.WaitGroup

	mu        sync.Mutex
	jobs      map[string]*job
	queues    map[string][]*job           // model → its queued jobs
	turns     map[string]map[string]int64 // model → owner → when last served
	seq       int64
	watchers  map[string]map[chan struct{}]bool
	wake      map[string]chan struct{}  // model → its dispatcher's wake
	failed    map[string]*fleet.Replica // model → the replica a job failed on last
	running   map[string]int64          // level key → its jobs running
	usage     *usage                    // the day's counts of jobs and GPU seconds
	retention time.Duration
	maxQueued int
}

// openService loads the jobs kept in dir; those queued or running when
// the process stopped are queued again.
func openService(dir string, logger *zap.Logger) (*service, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &service{dir: dir, logger: logger, jobs: map[string]*job{}, queues: map[string][]*job{},
		turns: map[string]map[string]int64{}, watchers: map[string]map[chan struct{}]bool{}, wake: map[string]chan struct{}{},
		failed: map[string]*fleet.Replica{}, running: map[string]int64{}, usage: openUsage(dir, logger)}
	s.ctx, s.stop = context.WithCancel(context.Background())
	entries, _ := os.ReadDir(dir)
	var loaded []*job
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "job.json"))
		if err != nil {
			continue
		}
		var j job
		if json.Unmarshal(b, &j) != nil || j.ID != e.Name() {
			logger.Warn("ignoring a job file that cannot be read", zap.String("job", e.Name()))
			continue
		}
		loaded = append(loaded, &j)
	}
	sort.Slice(loaded, func(a, b int) bool { return loaded[a].CreatedAt < loaded[b].CreatedAt })
	for _, j := range loaded {
		s.seq++
		j.seq = s.seq
		s.jobs[j.ID] = j
		j.classes, _ = checkWorkflow(j.Workflow)
		if !j.finished() {
			j.State, j.Progress, j.Node, j.StartedAt, j.Replica = stateQueued, 0, nil, 0, ""
			s.queues[j.Model] = append(s.queues[j.Model], j)
		}
	}
	s.retention = 24 * time.Hour
	s.done.Add(2)
	go s.janitor()
	go func() {
		defer s.done.Done()
		s.usage.writer(s.ctx)
	}()
	return s, nil
}

// use has the service serve with app (the running config's) and its
// settings, and starts the dispatchers of the models with queued jobs.
func (s *service) use(app *llm.App, retention time.Duration, maxQueued int) {
	s.app.Store(app)
	s.mu.Lock()
	s.retention, s.maxQueued = retention, maxQueued
	s.relimitLocked(app)
	models := make([]string, 0, len(s.queues))
	for m := range s.queues {
		models = append(models, m)
	}
	for _, m := range models {
		s.kickLocked(m)
	}
	s.mu.Unlock()
}

// Destruct stops the dispatchers; a running job is interrupted and
// queued again when the service opens next.
func (s *service) Destruct() error {
	s.stop()
	s.done.Wait()
	return nil
}

// save writes the job's record; a failure is logged (the job goes on).
func (s *service) save(j *job) {
	b, err := json.Marshal(j)
	if err == nil {
		dir := filepath.Join(s.dir, j.ID)
		if err = os.MkdirAll(dir, 0o700); err == nil {
			tmp := filepath.Join(dir, "job.json.tmp")
			if err = os.WriteFile(tmp, b, 0o600); err == nil {
				err = os.Rename(tmp, filepath.Join(dir, "job.json"))
			}
		}
	}
	if err != nil {
		s.logger.Error("saving a job", zap.String("job", j.ID), zap.Error(err))
	}
}

// changedLocked tells the job's watchers it changed.
func (s *service) changedLocked(j *job) {
	for ch := range s.watchers[j.ID] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// watch returns a channel told of each change of job id, and its end.
func (s *service) watch(id string) (chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.watchers[id] == nil {
		s.watchers[id] = map[chan struct{}]bool{}
	}
	s.watchers[id][ch] = true
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.watchers[id], ch)
		if len(s.watchers[id]) == 0 {
			delete(s.watchers, id)
		}
		s.mu.Unlock()
	}
}

// janitor removes finished jobs older than the retention, with their
// files.
func (s *service) janitor() {
	defer s.done.Done()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		s.mu.Lock()
		cut := time.Now().Add(-s.retention).Unix()
		var gone []*job
		for id, j := range s.jobs {
			if j.finished() && j.FinishedAt < cut {
				delete(s.jobs, id)
				gone = append(gone, j)
			}
		}
		s.mu.Unlock()
		for _, j := range gone {
			_ = os.RemoveAll(filepath.Join(s.dir, j.ID))
		}
		s.forgetOutputs(gone) // s3outputs.go
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// counts are the queued and running jobs by model, then state.
func (s *service) counts() map[string]map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[string]int{}
	for _, j := range s.jobs {
		if j.State != stateQueued && j.State != stateRunning {
			continue
		}
		if out[j.Model] == nil {
			out[j.Model] = map[string]int{stateQueued: 0, stateRunning: 0}
		}
		out[j.Model][j.State]++
	}
	return out
}
