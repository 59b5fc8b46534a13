package llm

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// The guardrails' outcomes over time: the totals of
// llmgw_guardrail_checks_total are sampled once a minute (and when the
// history is read), and each minute's increase is kept for a day: in
// memory on a single node, in the cluster's Redis in a cluster (every
// node adds its own increase, so the history is the cluster's). Nothing
// is added to the request path: the guardrails count as they always did.

const (
	histMinutes = 24 * 60 // a day of minutes
	histTTL     = 25 * time.Hour
)

var guardHistoryOperations = []operation{
	{"GET", "/llm/guardrails/history", "The guardrails' outcomes over time (passed, redacted, blocked, flagged, skipped, errored per check and stage): ?window= (default 24h, at most 24h) in steps of ?step= (default 1h, at least 1m); kept for a day, sampled each minute from the gateway's metrics; in a cluster, every node's", "/llm/guardrails/history", getGuardHistory, ""},
}

var guardHistorySchemas = map[string]opSchemas{
	"GET /llm/guardrails/history": {response: obj(map[string]any{
		"from":         typ("string", "start of the first step (RFC 3339)"),
		"to":           typ("string", "end of the last step (RFC 3339)"),
		"step_seconds": typ("integer", ""),
		"series": arr(obj(map[string]any{
			"check":   typ("string", ""),
			"stage":   typ("string", "input or output"),
			"outcome": typ("string", "passed, redacted, blocked, flagged, skipped or errored"),
			"counts":  arr(typ("integer", "the outcomes in one step, oldest first")),
		})),
	})},
}

// guardHistory is this process's sampler and, on a single node, its
// record. It outlives configs: reloads keep the history.
type guardHistory struct {
	mu   sync.Mutex
	last map[string]int64 // the totals at the last sample, by key
	mins [histMinutes]histMinute
	once sync.Once
}

// histMinute is one minute's increase by key; at is its Unix minute.
type histMinute struct {
	at     int64
	counts map[string]int64
}

var guardHist = &guardHistory{}

// histKey joins a series' labels.
func histKey(check, stage, outcome string) string { return check + "\x1f" + stage + "\x1f" + outcome }

// start samples once a minute for as long as the process runs.
func (h *guardHistory) start() {
	h.once.Do(func() {
		go func() {
			for range time.Tick(time.Minute) {
				if a := active.Load(); a != nil {
					if err := h.sample(context.Background(), a, now()); err != nil {
						a.logger.Warn("guardrails history: sampling", zap.Error(err))
					}
				}
			}
		}()
	})
}

// sample reads the guardrails' totals and adds their increase since the
// last sample to the current minute.
func (h *guardHistory) sample(ctx context.Context, a *App, t time.Time) error {
	var g llmapi.GuardrailOverview
	ctx0 := caddy.ActiveContext()
	if reg := ctx0.GetMetricsRegistry(); reg != nil {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, f := range families {
			readGuardrailMetrics(f, &g)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The counters count from the start of the process. A check a config
	// lacks is missing from its registry; its last total is kept, so that
	// it does not count twice when it comes back.
	if h.last == nil {
		h.last = map[string]int64{}
	}
	delta := map[string]int64{}
	for _, c := range g.Checks {
		for o, n := range c.Outcomes {
			k := histKey(c.Check, c.Stage, o)
			d := n - h.last[k]
			if d < 0 {
				d = n // a counter that started again
			}
			h.last[k] = n
			if d > 0 {
				delta[k] = d
			}
		}
	}
	if len(delta) == 0 {
		return nil
	}
	minute := t.Unix() / 60
	if a != nil && a.cluster != nil {
		err := a.cluster.addHistory(ctx, minute, delta)
		if err == nil {
			return nil
		}
		a.logger.Warn("guardrails history: the cluster store did not take this minute; kept on this node only", zap.Error(err))
	}
	m := &h.mins[minute%histMinutes]
	if m.at != minute || m.counts == nil {
		*m = histMinute{at: minute, counts: map[string]int64{}}
	}
	for k, d := range delta {
		m.counts[k] += d
	}
	return nil
}

// read adds the minutes in [from, to) (Unix minutes) kept on this node.
func (h *guardHistory) read(from, to int64, add func(minute int64, key string, n int64)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.mins {
		m := &h.mins[i]
		if m.at >= from && m.at < to {
			for k, n := range m.counts {
				add(m.at, k, n)
			}
		}
	}
}

// addHistory adds a minute's increase to the cluster's history.
func (m *member) addHistory(ctx context.Context, minute int64, delta map[string]int64) error {
	key := m.key("guardhist:" + strconv.FormatInt(minute, 10))
	p := m.rdb.TxPipeline()
	for k, d := range delta {
		p.HIncrBy(ctx, key, k, d)
	}
	p.Expire(ctx, key, histTTL)
	_, err := p.Exec(ctx)
	return err
}

// readHistory adds the cluster's minutes in [from, to).
func (m *member) readHistory(ctx context.Context, from, to int64, add func(minute int64, key string, n int64)) error {
	p := m.rdb.Pipeline()
	for min := from; min < to; min++ {
		p.HGetAll(ctx, m.key("guardhist:"+strconv.FormatInt(min, 10)))
	}
	cmds, err := p.Exec(ctx)
	if err != nil {
		return err
	}
	for i, c := range cmds {
		for k, v := range c.(*redis.MapStringStringCmd).Val() {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				add(from+int64(i), k, n)
			}
		}
	}
	return nil
}

func getGuardHistory(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	window, step := 24*time.Hour, time.Hour
	q := r.URL.Query()
	for _, p := range []struct {
		name string
		to   *time.Duration
	}{{"window", &window}, {"step", &step}} {
		if v := q.Get(p.name); v != "" {
			d, err := caddy.ParseDuration(v)
			if err != nil || d <= 0 {
				return apiErr(http.StatusBadRequest, "%s %q: give a duration such as 1h or 15m", p.name, v)
			}
			*p.to = d
		}
	}
	switch {
	case window > 24*time.Hour:
		return apiErr(http.StatusBadRequest, "window %s: the history is kept for 24h; ask for 24h or less", window)
	case step < time.Minute || step%time.Minute != 0:
		return apiErr(http.StatusBadRequest, "step %s: give whole minutes, 1m or more", step)
	case step > window:
		return apiErr(http.StatusBadRequest, "step %s is longer than the window %s", step, window)
	}
	t := now()
	if err := guardHist.sample(r.Context(), a, t); err != nil {
		a.logger.Warn("guardrails history: sampling", zap.Error(err))
	}
	stepMin := int64(step / time.Minute)
	steps := int64((window + step - 1) / step)
	to := t.Unix()/60 + 1 // the current minute included
	to += (stepMin - to%stepMin) % stepMin
	from := to - steps*stepMin
	out := &llmapi.GuardHistory{From: time.Unix(from*60, 0).UTC(), To: time.Unix(to*60, 0).UTC(), StepSeconds: stepMin * 60,
		Series: []llmapi.GuardSeries{}}
	byKey := map[string]int{} // series by key, while it is built
	add := func(minute int64, key string, n int64) {
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
	if a.cluster != nil {
		if err := a.cluster.readHistory(r.Context(), from, to, add); err != nil {
			return apiErr(http.StatusServiceUnavailable, "%v", a.cluster.storeErr(err))
		}
	}
	guardHist.read(from, to, add) // minutes the cluster store did not take
	slices.SortFunc(out.Series, func(x, y llmapi.GuardSeries) int {
		return strings.Compare(histKey(x.Check, x.Stage, x.Outcome), histKey(y.Check, y.Stage, y.Outcome))
	})
	return writeJSON(w, out)
}
