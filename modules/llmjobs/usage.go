package llmjobs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/tenancy"
	"github.com/llmgw/llmgw/modules/openai"
)

// usageFile holds the day's counters, in the jobs' directory.
const usageFile = "quota.json"

// usage counts, for each tenancy level and the current UTC day, the jobs
// accepted (jobs_per_day) and the GPU seconds they ran
// (gpu_seconds_per_day). It is kept in quota.json in the jobs' directory,
// written in the background after each change (never on the request
// path) and when the service stops, so that the counts survive a reload
// (the service is shared) and a restart (the file is read again).
type usage struct {
	path   string
	logger *zap.Logger
	dirty  chan struct{}

	mu     sync.Mutex
	day    string               // UTC, 2006-01-02
	levels map[string]*levelUse // level key (kind:name) → the day's use
}

// levelUse is one level's use in a day.
type levelUse struct {
	Jobs       int64   `json:"jobs"`
	GPUSeconds float64 `json:"gpu_seconds"`
}

// usageRecord is quota.json.
type usageRecord struct {
	Day    string               `json:"day"`
	Levels map[string]*levelUse `json:"levels"`
}

// openUsage reads the counters kept in dir; a file that cannot be read
// starts the day afresh (logged).
func openUsage(dir string, logger *zap.Logger) *usage {
	u := &usage{path: filepath.Join(dir, usageFile), logger: logger, dirty: make(chan struct{}, 1), levels: map[string]*levelUse{}}
	b, err := os.ReadFile(u.path)
	if os.IsNotExist(err) {
		return u
	}
	var rec usageRecord
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		logger.Warn("the jobs' quota counters cannot be read; they start at zero", zap.String("file", u.path), zap.Error(err))
		return u
	}
	u.day = rec.Day
	for k, v := range rec.Levels {
		if v != nil {
			u.levels[k] = v
		}
	}
	return u
}

// levelKey names a level in the counters.
func levelKey(kind, name string) string { return kind + ":" + name }

// utcDay is the UTC day of t.
func utcDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// rollLocked starts a new day's counts when the day has changed.
func (u *usage) rollLocked(now time.Time) {
	if d := utcDay(now); d != u.day {
		u.day, u.levels = d, map[string]*levelUse{}
	}
}

func (u *usage) useLocked(key string) *levelUse {
	l := u.levels[key]
	if l == nil {
		l = new(levelUse)
		u.levels[key] = l
	}
	return l
}

// quotaRefusal is why a job is not accepted: a level at its
// jobs_per_day or gpu_seconds_per_day.
type quotaRefusal struct {
	level  tenancy.Level
	what   string
	renews time.Duration
}

func (q *quotaRefusal) Error() string {
	return fmt.Sprintf("the %s %s has used %s; it renews in %s (at 00:00 UTC)", q.level.Kind, q.level.Name, q.what, q.renews)
}

// apiError is the refusal as the API answers it: 429 with Retry-After.
func (q *quotaRefusal) apiError() *openai.Error {
	return &openai.Error{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "job_quota_exceeded",
		RetryAfter: q.renews, Message: q.Error() + "; try again then, or ask for a higher limit"}
}

// admit counts a new job at each of levels for the day of now, unless
// one of them is at its jobs_per_day or gpu_seconds_per_day; it returns
// the day counted.
func (u *usage) admit(levels []tenancy.Level, now time.Time) (string, *quotaRefusal) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rollLocked(now)
	for _, l := range levels {
		use := u.levels[levelKey(l.Kind, l.Name)]
		if use == nil {
			use = new(levelUse)
		}
		switch lim := l.Limits; {
		case lim.JobsPerDay > 0 && use.Jobs >= lim.JobsPerDay:
			return "", &quotaRefusal{level: l, what: fmt.Sprintf("its %d jobs per day (jobs_per_day)", lim.JobsPerDay), renews: untilMidnight(now)}
		case lim.GPUSecondsPerDay > 0 && use.GPUSeconds >= float64(lim.GPUSecondsPerDay):
			return "", &quotaRefusal{level: l, what: fmt.Sprintf("%s of its %d GPU seconds per day (gpu_seconds_per_day)",
				strconv.FormatFloat(use.GPUSeconds, 'f', 1, 64), lim.GPUSecondsPerDay), renews: untilMidnight(now)}
		}
	}
	for _, l := range levels {
		u.useLocked(levelKey(l.Kind, l.Name)).Jobs++
	}
	u.changed()
	return u.day, nil
}

// giveBack uncounts a job counted on day at the levels (keys), when that
// day is still the current one.
func (u *usage) giveBack(keys []string, day string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if day == "" || day != u.day {
		return
	}
	for _, k := range keys {
		if l := u.levels[k]; l != nil && l.Jobs > 0 {
			l.Jobs--
		}
	}
	u.changed()
}

// charge counts seconds of GPU time at the levels (keys), on the day of
// now.
func (u *usage) charge(keys []string, seconds float64, now time.Time) {
	if len(keys) == 0 || seconds <= 0 {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rollLocked(now)
	for _, k := range keys {
		u.useLocked(k).GPUSeconds += seconds
	}
	u.changed()
}

// used is a level's use on the day of now.
func (u *usage) used(key string, now time.Time) levelUse {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.rollLocked(now)
	if l := u.levels[key]; l != nil {
		return *l
	}
	return levelUse{}
}

// changed asks the writer to write the counters.
func (u *usage) changed() {
	select {
	case u.dirty <- struct{}{}:
	default:
	}
}

// writer writes the counters after each change (at most every 200ms)
// until ctx ends, then once more.
func (u *usage) writer(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil {
			u.logger.Error("writing the jobs' quota counters", zap.Any("panic", v), zap.Stack("stack"))
		}
	}()
	for {
		select {
		case <-ctx.Done():
			u.write()
			return
		case <-u.dirty:
			u.write()
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// write saves the counters (to a temporary file, then renamed).
func (u *usage) write() {
	u.mu.Lock()
	b, err := json.Marshal(usageRecord{Day: u.day, Levels: u.levels})
	u.mu.Unlock()
	if err == nil {
		tmp := u.path + ".tmp"
		if err = os.WriteFile(tmp, b, 0o600); err == nil {
			err = os.Rename(tmp, u.path)
		}
	}
	if err != nil {
		u.logger.Error("saving the jobs' quota counters", zap.String("file", u.path), zap.Error(err))
	}
}

// untilMidnight is the time from now to the next UTC midnight, to the
// second (at least one).
func untilMidnight(now time.Time) time.Duration {
	t := now.UTC()
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
	return max(next.Sub(t).Truncate(time.Second), time.Second)
}
