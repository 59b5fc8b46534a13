package guardhist

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// counters stands for the guardrails' counters: blocked counts of the
// topics check on input.
type counters struct{ blocked int64 }

func (c *counters) totals() ([]llmapi.GuardrailChecks, error) {
	return []llmapi.GuardrailChecks{{Check: "topics", Stage: "input", Outcomes: map[string]int64{"blocked": c.blocked}}}, nil
}

func sum(h *llmapi.GuardHistory) (n int64) {
	for _, s := range h.Series {
		if s.Check == "topics" && s.Stage == "input" && s.Outcome == "blocked" {
			for _, c := range s.Counts {
				n += c
			}
		}
	}
	return n
}

// A reload opens the new config's history before the old one closes:
// the history goes on, and what the counters counted before the reload
// is not counted again. Once no config holds it, it is forgotten.
func TestHistoryAcrossReload(t *testing.T) {
	ctx := context.Background()
	c := &counters{blocked: 5}
	t0 := time.Date(2026, 1, 2, 15, 0, 30, 0, time.UTC)
	clock := t0
	now := func() time.Time { return clock }
	old := Open(Options{Totals: c.totals, Now: now})
	if err := old.Sample(ctx, clock); err != nil {
		t.Fatal(err)
	}
	next := Open(Options{Totals: c.totals, Now: now})
	old.Close()
	c.blocked, clock = 7, t0.Add(3*time.Minute)
	h, err := next.Read(ctx, Range{Window: time.Hour, Step: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := sum(h); got != 7 {
		t.Errorf("after a reload the history counts %d blocked, want 7", got)
	}
	if len(h.Series) != 1 || h.Series[0].Counts[len(h.Series[0].Counts)-1] != 2 || h.Series[0].Counts[len(h.Series[0].Counts)-4] != 5 {
		t.Errorf("series %+v; want 5 three minutes ago and 2 now", h.Series)
	}
	next.Close()
	again := Open(Options{Totals: func() ([]llmapi.GuardrailChecks, error) { return nil, nil }, Now: now})
	defer again.Close()
	if h, _ := again.Read(ctx, Range{Window: time.Hour, Step: time.Minute}); len(h.Series) != 0 {
		t.Errorf("a history no config held is still there: %+v", h.Series)
	}
}

// store is a Store in memory, or one that does not answer.
type store struct {
	mins map[int64]map[string]int64
	down error
}

func (s *store) AddMinute(_ context.Context, minute int64, delta map[string]int64) error {
	if s.down != nil {
		return s.down
	}
	if s.mins[minute] == nil {
		s.mins[minute] = map[string]int64{}
	}
	for k, d := range delta {
		s.mins[minute][k] += d
	}
	return nil
}

func (s *store) ReadMinutes(_ context.Context, from, to int64, add func(int64, string, int64)) error {
	if s.down != nil {
		return s.down
	}
	for m := from; m < to; m++ {
		for k, n := range s.mins[m] {
			add(m, k, n)
		}
	}
	return nil
}

// In a cluster a minute goes to the store, and stays on the node when
// the store does not take it; a read the store does not answer fails with
// the store's error.
func TestHistoryCluster(t *testing.T) {
	ctx := context.Background()
	c := &counters{blocked: 3}
	s := &store{mins: map[int64]map[string]int64{}}
	h := Open(Options{Totals: c.totals, Store: s})
	defer h.Close()
	if err := h.Sample(ctx, time.Now()); err != nil || len(s.mins) != 1 {
		t.Fatalf("the store has %d minutes (%v), want 1", len(s.mins), err)
	}
	s.down = errors.New("connection refused")
	c.blocked = 4
	if err := h.Sample(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Read(ctx, Range{Window: time.Hour, Step: time.Minute}); err != s.down {
		t.Errorf("read with the store down: %v, want the store's error", err)
	}
	s.down = nil
	got, err := h.Read(ctx, Range{Window: time.Hour, Step: time.Minute})
	if err != nil || sum(got) != 4 {
		t.Errorf("the store's 3 and the node's 1: %d, %v", sum(got), err)
	}
}

func TestParseRange(t *testing.T) {
	if r, err := ParseRange("", ""); err != nil || r.Window != 24*time.Hour || r.Step != time.Hour {
		t.Errorf("defaults: %+v, %v", r, err)
	}
	if r, err := ParseRange("10m", "5m"); err != nil || r.Window != 10*time.Minute || r.Step != 5*time.Minute {
		t.Errorf("10m in 5m: %+v, %v", r, err)
	}
	for _, tc := range []struct{ name, window, step, want string }{
		{"not a duration", "soon", "", `window "soon": give a duration such as 1h or 15m`},
		{"negative", "", "-1m", `step "-1m": give a duration`},
		{"longer than kept", "25h", "", "the history is kept for 24h"},
		{"part of a minute", "1h", "90s", "give whole minutes, 1m or more"},
		{"step over window", "10m", "1h", "step 1h0m0s is longer than the window 10m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseRange(tc.window, tc.step); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}
