package main

import (
	"math"
	"testing"
	"time"
)

// TestProvidersDay runs the router's policies through most of a
// simulated day (both of the cheap provider's outages, its slow hour,
// the afternoon peak) and checks what a user would look for in the
// table.
func TestProvidersDay(t *testing.T) {
	cfg := defaultDay()
	cfg.Duration = 20 * time.Hour
	res := simulateDay(cfg)
	if res.Requests < 50000 {
		t.Fatalf("%d requests in 20 hours at a peak of 3/s, want more than 50,000", res.Requests)
	}
	oracle := res.row("oracle")
	for _, r := range res.Rows {
		t.Logf("%-8s spent %.2f (tokens %.2f) ttft p50 %.2fs p95 %.2fs within %.1f%% 429s %d failed tries %d failovers %d failed %d share %v outage tries %v",
			r.Policy, r.Spent, r.TokenSpent, r.TTFT50, r.TTFT95, 100*r.Within, r.Tries429, r.TriesDown, r.Failovers, r.Failed, r.Share, r.OutageTries)
		if r.Failed > 0 {
			t.Errorf("%s: %d requests failed, want none (a provider always answers)", r.Policy, r.Failed)
		}
		if r.Within >= oracle.Within && r.Spent < oracle.Spent {
			t.Errorf("%s keeps %.2f%% of first tokens within the objective (the oracle %.2f%%) for %.2f, less than the oracle's %.2f",
				r.Policy, 100*r.Within, 100*oracle.Within, r.Spent, oracle.Spent)
		}
	}
	cost, latency := res.row("cost"), res.row("latency")
	if cost.Spent >= latency.Spent {
		t.Errorf("cost spent %.2f, latency %.2f: want cost to spend less", cost.Spent, latency.Spent)
	}
	if latency.TTFT95 >= cost.TTFT95 {
		t.Errorf("time to first token p95: latency %.2fs, cost %.2fs: want latency's lower", latency.TTFT95, cost.TTFT95)
	}
	if oracle.Within < 0.999 || oracle.Tries429+oracle.TriesDown > 0 {
		t.Errorf("the oracle: %.2f%% within the objective, %d failed tries: want all within and none failed", 100*oracle.Within, oracle.Tries429+oracle.TriesDown)
	}
	checkOutageTries(t, res)
}

// checkOutageTries: after its first failures, a provider in an outage
// rests (0.5 s doubling to 15 s) and is tried again only when its rest
// ends. So each outage sees at most its length over 15 s plus 6 rounds
// of tries, each round the requests that arrive before its first failure
// is known (twice the outage's mean arrivals within its failure time,
// bursts included). A policy told nothing of the failures sends several
// times more.
func checkOutageTries(t *testing.T, res providersResult) {
	cfg := res.Config
	reqs := dayRequests(cfg)
	for _, p := range dayProviders(cfg) {
		bound := 0
		for _, w := range p.outages {
			if w.from >= cfg.Duration {
				continue
			}
			rounds := int((w.to-w.from)/(15*time.Second)) + 6
			n := 0
			for _, r := range reqs {
				if d := time.Duration(r.at); d >= w.from && d < w.to {
					n++
				}
			}
			during := 2 * float64(n) * float64(w.after+30*time.Millisecond) / float64(w.to-w.from)
			bound += rounds * (1 + int(math.Ceil(during)))
		}
		for _, r := range res.Rows {
			if got := r.OutageTries[p.name]; got > bound {
				t.Errorf("%s sent %d tries to %s during its outages, want at most %d", r.Policy, got, p.name, bound)
			}
		}
		t.Logf("%s: at most %d tries during its outages", p.name, bound)
		if p.name == "cheap" && res.row("cost").OutageTries["cheap"] == 0 {
			t.Errorf("cost never tried cheap during its outages: the outages did not matter")
		}
	}
}
