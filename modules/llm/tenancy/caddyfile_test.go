package tenancy

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// The job limits parse at every level; a bad value says which.
func TestParseJobLimits(t *testing.T) {
	var got *Org
	d := caddyfile.NewTestDispenser(`org acme {
		jobs_per_day 100
		team research {
			gpu_seconds_per_day 3600
			project web {
				concurrent_jobs 2
				key k1 0000000000000000000000000000000000000000000000000000000000000000 {
					jobs_per_day 5
				}
			}
		}
	}`)
	d.Next()
	if err := ParseOrg(d, func(o *Org) { got = o }); err != nil {
		t.Fatal(err)
	}
	p := got.Teams[0].Projects[0]
	if got.Limits.JobsPerDay != 100 || got.Teams[0].Limits.GPUSecondsPerDay != 3600 || p.Limits.ConcurrentJobs != 2 || p.Keys[0].Limits.JobsPerDay != 5 {
		t.Errorf("got org %+v, team %+v, project %+v, key %+v", got.Limits, got.Teams[0].Limits, p.Limits, p.Keys[0].Limits)
	}
	d = caddyfile.NewTestDispenser("org acme {\n\tconcurrent_jobs many\n}")
	d.Next()
	if err := ParseOrg(d, func(*Org) {}); err == nil || !strings.Contains(err.Error(), "many") {
		t.Errorf("concurrent_jobs many: got %v", err)
	}
	if err := (&Limits{GPUSecondsPerDay: -1}).Validate(); err == nil {
		t.Error("a negative gpu_seconds_per_day was accepted")
	}
}
