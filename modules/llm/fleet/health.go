package fleet

import (
	"context"
	"net/http"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/engine"
	"go.uber.org/zap"
)

// ReplicaFailing is a replica whose engine reports it does not serve now
// (an outside provider that does not answer, refuses its key or fails):
// it is kept, gets no request, and is ready again once its engine says
// so.
const ReplicaFailing State = "failing"

// Reason is why a failing replica fails, or "".
func (r *Replica) Reason() string {
	if s, ok := r.reason.Load().(string); ok && r.State() == ReplicaFailing {
		return s
	}
	return ""
}

// health applies what the engine's Status says of a ready or failing
// replica: failing (with why) or ready again.
func (f *Fleet) health(r *Replica, st engine.Status) {
	switch {
	case st.State == engine.StateFailing:
		why := st.Message
		if why == "" {
			why = "its engine reports it failing"
		}
		prev, _ := r.reason.Load().(string)
		r.reason.Store(why)
		if r.state.CompareAndSwap(ReplicaReady, ReplicaFailing) || prev != why {
			f.logger.Info("replica failing", zap.String("replica", r.ID), zap.String("reason", why))
			f.changedNow()
		}
	case r.state.CompareAndSwap(ReplicaFailing, ReplicaReady):
		f.logger.Info("replica ready again", zap.String("replica", r.ID))
		f.changedNow()
	}
}

// changedNow wakes those waiting for a replica.
func (f *Fleet) changedNow() {
	f.mu.Lock()
	f.Notify()
	f.mu.Unlock()
}

// failingLocked returns why the model has no replica to send requests to
// when each one it has is failing, or "".
func (f *Fleet) failingLocked() string {
	if f.starting > 0 || len(f.replicas) == 0 {
		return ""
	}
	why := ""
	for _, r := range f.replicas {
		if r.State() != ReplicaFailing {
			return ""
		}
		why = r.Reason()
	}
	for _, r := range f.remote {
		if r.State() == ReplicaReady {
			return ""
		}
	}
	return why
}

// Test probes each of the model's replicas on this node (GET <base
// URL>/models with the replica's key), as its engine's supervision does,
// and reports what it found. It changes no replica's state.
func (f *Fleet) Test(ctx context.Context, client *http.Client) llmapi.ModelTest {
	f.mu.Lock()
	rs := append([]*Replica(nil), f.replicas...)
	f.mu.Unlock()
	out := llmapi.ModelTest{Model: f.Model().Name, Replicas: []llmapi.ReplicaTest{}}
	for _, r := range rs {
		headers := map[string]string{}
		for k, v := range r.Header {
			headers[k] = strings.Join(v, "\n") // alternatives, as the engine gave them
		}
		res := engine.ProbeFor(engine.Replica{BaseURL: r.BaseURL, Headers: headers}, 0).Check(ctx, ClientFor(client, r))
		out.Replicas = append(out.Replicas, llmapi.ReplicaTest{Replica: r.ID, URL: res.URL, Status: res.Status,
			LatencyMS: float64(res.Latency.Microseconds()) / 1000, State: res.State, Reason: res.Reason})
		if res.State == engine.StateReady {
			out.OK = true
		} else if out.Reason == "" {
			out.Reason = res.Reason
		}
	}
	if len(rs) == 0 {
		st := f.Status()
		out.Reason = "no replica of it runs on this node to test (" + st.State + ")"
		if st.Reason != "" {
			out.Reason += ": " + st.Reason
		}
	}
	return out
}
