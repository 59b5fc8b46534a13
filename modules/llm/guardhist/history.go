package guardhist

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/minutes"
)

// ring names the history's minutes kept on this node (package minutes).
const ring = "guardhist"

const (
	// TTL is how long the cluster's store keeps a minute.
	TTL = 25 * time.Hour
)

// Store is the cluster's history, which every node adds its increase to.
// The cluster member implements it.
type Store interface {
	// AddMinute adds a minute's increase by key (see Key) to the
	// minute's counts; minute is a Unix minute.
	AddMinute(ctx context.Context, minute int64, delta map[string]int64) error
	// ReadMinutes calls add for each key of each minute in [from, to).
	ReadMinutes(ctx context.Context, from, to int64, add func(minute int64, key string, n int64)) error
}

// Key joins a series' labels: the key of Store's counts.
func Key(check, stage, outcome string) string { return check + "\x1f" + stage + "\x1f" + outcome }

// Options are what a config's History is made of.
type Options struct {
	// Totals reads the guardrails' counters, which count from the start
	// of the process.
	Totals func() ([]llmapi.GuardrailChecks, error)
	// Store is the cluster's history; nil on a single node.
	Store Store
	// Logger takes the failures of sampling.
	Logger *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// History is the guardrails' history as one config samples and reads it.
type History struct {
	o     Options
	rec   *minutes.Ring
	taken bool // rec is held
}

// Open returns the history of a config; Close lets go of it when the
// config stops.
func Open(o Options) *History {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return &History{o: o, rec: minutes.Acquire(ring), taken: true}
}

// Close lets go of the record; the last config's close forgets it.
func (h *History) Close() {
	if h != nil && h.taken {
		minutes.Release(ring)
		h.taken = false
	}
}

// Run samples once a minute until ctx is done.
func (h *History) Run(ctx context.Context) {
	minutes.Run(ctx, "guardrails history", h.o.Logger, h.o.Now, h.Sample)
}

// Sample reads the guardrails' totals and adds their increase since the
// last sample to the minute of t: in the cluster's store, or on this
// node when there is none or it does not take it.
func (h *History) Sample(ctx context.Context, t time.Time) error {
	checks, err := h.o.Totals()
	if err != nil {
		return err
	}
	delta := h.rec.Increase(totals(checks))
	if len(delta) == 0 {
		return nil
	}
	at := t.Unix() / 60
	if h.o.Store != nil {
		err := h.o.Store.AddMinute(ctx, at, delta)
		if err == nil {
			return nil
		}
		h.o.Logger.Warn("guardrails history: the cluster store did not take this minute; kept on this node only", zap.Error(err))
	}
	h.rec.Add(at, delta, nil)
	return nil
}

// totals are the checks' outcomes by key (see Key).
func totals(checks []llmapi.GuardrailChecks) map[string]int64 {
	out := map[string]int64{}
	for _, c := range checks {
		for o, n := range c.Outcomes {
			out[Key(c.Check, c.Stage, o)] = n
		}
	}
	return out
}

// Range is the span GET /llm/guardrails/history asks for.
type Range struct {
	Window time.Duration // how far back, the current minute included
	Step   time.Duration // the span of one count, whole minutes
}

// ParseRange reads ?window= (default 24h, at most 24h) and ?step=
// (default 1h, whole minutes, at most the window). Its errors are the
// client's.
func ParseRange(window, step string) (Range, error) {
	r := Range{Window: 24 * time.Hour, Step: time.Hour}
	for _, p := range []struct {
		name, value string
		to          *time.Duration
	}{{"window", window, &r.Window}, {"step", step, &r.Step}} {
		if p.value != "" {
			d, err := caddy.ParseDuration(p.value)
			if err != nil || d <= 0 {
				return r, fmt.Errorf("%s %q: give a duration such as 1h or 15m", p.name, p.value)
			}
			*p.to = d
		}
	}
	switch {
	case r.Window > 24*time.Hour:
		return r, fmt.Errorf("window %s: the history is kept for 24h; ask for 24h or less", r.Window)
	case r.Step < time.Minute || r.Step%time.Minute != 0:
		return r, fmt.Errorf("step %s: give whole minutes, 1m or more", r.Step)
	case r.Step > r.Window:
		return r, fmt.Errorf("step %s is longer than the window %s", r.Step, r.Window)
	}
	return r, nil
}

// Read samples now, then counts each series' outcomes in each step of
// rng, ending with the current minute: the cluster's, and the minutes
// this node kept itself. Its only error is the store's, as it is.
func (h *History) Read(ctx context.Context, rng Range) (*llmapi.GuardHistory, error) {
	t := h.o.Now()
	if err := h.Sample(ctx, t); err != nil {
		h.o.Logger.Warn("guardrails history: sampling", zap.Error(err))
	}
	stepMin := int64(rng.Step / time.Minute)
	steps := int64((rng.Window + rng.Step - 1) / rng.Step)
	to := t.Unix()/60 + 1 // the current minute included
	to += (stepMin - to%stepMin) % stepMin
	from := to - steps*stepMin
	out := &llmapi.GuardHistory{From: time.Unix(from*60, 0).UTC(), To: time.Unix(to*60, 0).UTC(), StepSeconds: stepMin * 60,
		Series: []llmapi.GuardSeries{}}
	add := series(out, from, stepMin, steps)
	if h.o.Store != nil {
		if err := h.o.Store.ReadMinutes(ctx, from, to, add); err != nil {
			return nil, err
		}
	}
	h.rec.Read(from, to, add, nil) // minutes the cluster store did not take
	slices.SortFunc(out.Series, func(x, y llmapi.GuardSeries) int {
		return strings.Compare(Key(x.Check, x.Stage, x.Outcome), Key(y.Check, y.Stage, y.Outcome))
	})
	return out, nil
}

// series returns the function that adds a minute's count of a key to
// out's series of that key, made on its first count.
func series(out *llmapi.GuardHistory, from, stepMin, steps int64) func(minute int64, key string, n int64) {
	byKey := map[string]int{} // series by key, while it is built
	return func(minute int64, key string, n int64) {
		i, ok := byKey[key]
		if !ok {
			parts := strings.SplitN(key, "\x1f", 3)
			if len(parts) != 3 {
				return
			}
			i = len(out.Series)
			byKey[key] = i
			out.Series = append(out.Series, llmapi.GuardSeries{Check: parts[0], Stage: parts[1], Outcome: parts[2], Counts: make([]int64, steps)})
		}
		out.Series[i].Counts[(minute-from)/stepMin] += n
	}
}
