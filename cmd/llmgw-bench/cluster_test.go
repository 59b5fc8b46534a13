package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestChangePlanMixesEveryKind(t *testing.T) {
	plan := changePlan(100)
	if len(plan) != 100 {
		t.Fatalf("changePlan(100) made %d changes", len(plan))
	}
	kinds := map[string]int{}
	live := map[string]bool{}
	for i, ch := range plan {
		kinds[ch.kind]++
		switch {
		case ch.kind == "add":
			if live[ch.model] {
				t.Errorf("change %d adds %s twice", i, ch.model)
			}
			live[ch.model] = true
		case !live[ch.model]:
			t.Errorf("change %d (%s) is made to %s, which is not there", i, ch.kind, ch.model)
		case ch.kind == "remove":
			delete(live, ch.model)
		}
		if !strings.Contains(ch.path+ch.body, ch.model) {
			t.Errorf("change %d (%s %s %s) does not name its model %s", i, ch.method, ch.path, ch.body, ch.model)
		}
	}
	for _, k := range []string{"add", "scale", "canary", "stop", "start", "remove"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the changes: %v", k, kinds)
		}
	}
	if len(live) != 0 {
		t.Errorf("models left after 100 changes: %v", live)
	}
	// A removal shows as a 404; any other change needs the model there.
	if rm := plan[9]; rm.kind != "remove" || !rm.seen(modelStatus{}, 404) || rm.seen(modelStatus{}, 200) {
		t.Errorf("the tenth change is %s, seen on a 404: %t", rm.kind, rm.seen(modelStatus{}, 404))
	}
	if sc := plan[1]; sc.kind != "scale" || sc.seen(modelStatus{Max: 2}, 404) || !sc.seen(modelStatus{Max: 2}, 200) || sc.seen(modelStatus{Max: 1}, 200) {
		t.Errorf("the second change (%s %s) is not seen as max 2", sc.kind, sc.body)
	}
}

func TestHopRatio(t *testing.T) {
	for _, tc := range []struct {
		hop, caddy time.Duration
		want       float64
	}{{100, 200, .5}, {300, 200, 1.5}, {0, 200, 0}, {-50, 200, 0}, {100, 0, math.Inf(1)}, {100, -10, math.Inf(1)}} {
		if got := hopRatio(tc.hop, tc.caddy); got != tc.want {
			t.Errorf("hopRatio(%v, %v) = %v, want %v", tc.hop, tc.caddy, got, tc.want)
		}
	}
	for _, tc := range []struct {
		mean, f float64
		want    string
	}{{.9, 1.05, "met"}, {1.2, 1.1, "over"}, {.98, 1.1, "met, within the noise"}, {1.05, 1.1, "over, within the noise"}, {1.2, math.Inf(1), "over, within the noise"}} {
		if got := verdict(tc.mean, tc.f); got != tc.want {
			t.Errorf("verdict(%v, %v) = %q, want %q", tc.mean, tc.f, got, tc.want)
		}
	}
}
