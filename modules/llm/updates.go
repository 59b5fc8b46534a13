package llm

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgw/llmgw/mirror"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/fleet"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/weights"
)

// Registry updates: a model served from a tracked registry repository
// (source hf://org/repo[@revision][/path], or mirror://<model> of a
// mirror model added with --track) is checked on a schedule (update_check,
// default 6h) for a new commit of its revision. GET
// /llm/models/<name>/updates shows the last check; POST …/update fetches
// the new revision into the mirror beside the old files, checks its sums,
// makes it current and replaces the model's replicas one at a time as a
// live change does (new replicas start on the new files, old ones drain
// on the old); POST …/rollback returns to the previous version the same
// way. In a cluster every live node replaces its replicas in turn (see
// updates_cluster.go).

// updateEvery is the model's check interval; 0 means off.
func (a *App) updateEvery(m *catalog.Model) time.Duration {
	d := time.Duration(a.UpdateCheck)
	if m.UpdateCheck != 0 {
		d = time.Duration(m.UpdateCheck)
	}
	switch {
	case d < 0:
		return 0
	case d == 0:
		return weights.DefaultUpdateCheck
	}
	return d
}

// checkUpdatesEvery asks the registry about each tracked model once its
// interval has passed since its last check, until ctx is done.
func (a *App) checkUpdatesEvery(ctx context.Context) {
	defer func() {
		if v := recover(); v != nil {
			a.logger.Error("update checks stopped", zap.Any("panic", v), zap.Stack("stack"))
		}
	}()
	for {
		tick := time.Minute
		mr := a.mirror
		a.forgetChecks()
		for _, m := range a.v().models {
			every := a.updateEvery(m)
			mm, ok := weights.TrackedModel(m)
			if !ok || every == 0 || mr == nil {
				continue
			}
			tick = min(tick, max(every/4, 100*time.Millisecond))
			lastCheck, _ := a.shared.checks.get(m.Name)
			last := lastCheck.CheckedAt
			if last != nil && now().Sub(*last) < every {
				continue
			}
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			u := a.checkUpdate(cctx, mr, m, mm, true)
			cancel()
			if u.Error != "" {
				a.logger.Warn("checking the registry for an update", zap.String("model", m.Name), zap.String("error", u.Error))
			} else if u.UpdateAvailable {
				a.logger.Info("update available", zap.String("model", m.Name), zap.String("current", u.Current), zap.String("available", u.Available))
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(tick):
		}
	}
}

// forgetChecks drops the checks of models no longer in the catalog.
func (a *App) forgetChecks() {
	cat := a.v().cat
	a.shared.checks.keepOnly(func(name string) bool {
		_, ok := cat.ByName[name]
		return ok
	})
}

// checkUpdate reads the model's track and current manifest from the
// mirror and, with registry, asks the registry for its revision's commit;
// the result is kept for GET …/updates. Without registry the last known
// commit is kept.
func (a *App) checkUpdate(ctx context.Context, mr *mirror.Mirror, m *catalog.Model, mm string, registry bool) llmapi.ModelUpdates {
	last, _ := a.shared.checks.get(m.Name)
	u := llmapi.ModelUpdates{Model: m.Name, Source: mirror.RedactURL(m.Source), MirrorModel: mm, Every: "off",
		Available: last.Available, CheckedAt: last.CheckedAt, Error: last.Error}
	every := a.updateEvery(m)
	if every > 0 {
		u.Every = every.String()
	}
	t, err := mr.Track(ctx, mm)
	switch {
	case err == nil:
		u.Repository, u.Current, u.Previous = t.Source, t.Current, t.Previous
		if man, err := mr.Show(ctx, mm, t.Current); err == nil {
			u.CurrentCommit = man.Origin.Commit
		}
		if registry {
			at := now().UTC()
			u.CheckedAt, u.Error = &at, ""
			if ref, err := mirror.ParseRegistryRef(t.Source); err != nil {
				u.Error = err.Error()
			} else if c, err := mr.Commit(ctx, ref); err != nil {
				u.Error = fmt.Sprintf("asking the registry for %s: %v", t.Source, err)
			} else {
				u.Available = c
			}
		}
	case strings.HasPrefix(m.Source, "hf://"):
		u.Error = "the model's weights are not in the mirror yet; they are fetched (and followed) at its first start"
	default:
		u.Error = fmt.Sprintf("mirror model %s follows no registry repository; add it with llmgw mirror add --track from an hf:// source", mm)
	}
	u.UpdateAvailable = u.Available != "" && u.CurrentCommit != "" && u.Available != u.CurrentCommit
	if u.CheckedAt != nil && every > 0 {
		next := u.CheckedAt.Add(every)
		u.NextCheck = &next
	}
	a.shared.checks.put(m.Name, u)
	return u
}

// updatesRoute serves GET /llm/models/<name>/updates and POST
// …/update and …/rollback; ok is false for other paths.
func updatesRoute(w http.ResponseWriter, r *http.Request, name, action string) (bool, error) {
	want := map[string]string{"updates": http.MethodGet, "update": http.MethodPost, "rollback": http.MethodPost}[action]
	if want == "" {
		return false, nil
	}
	if r.Method != want {
		return true, apiErr(http.StatusMethodNotAllowed, "use %s /llm/models/%s/%s", want, name, action)
	}
	a, err := running()
	if err != nil {
		return true, err
	}
	m, f, mr, mm, err := a.trackedModel(name)
	if err != nil {
		return true, err
	}
	switch action {
	case "updates":
		u, checked := a.shared.checks.get(m.Name)
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		check := r.URL.Query().Get("check") == "true"
		u = a.checkUpdate(ctx, mr, m, mm, check || !checked || u.CheckedAt == nil)
		return true, writeJSON(w, u)
	case "update":
		return true, a.updateModel(w, r, m, f, mr, mm)
	}
	return true, a.rollbackModel(w, r, m, f, mr, mm)
}

// trackedModel finds a catalog model served from a tracked source.
func (a *App) trackedModel(name string) (*catalog.Model, *fleet.Fleet, *mirror.Mirror, string, error) {
	m, err := a.Lookup(name)
	if err != nil {
		return nil, nil, nil, "", apiErr(http.StatusNotFound, "%v", err)
	}
	mm, ok := weights.TrackedModel(m)
	if !ok {
		return nil, nil, nil, "", apiErr(http.StatusBadRequest, "model %q is not served from a tracked source (its source is %q); updates and rollbacks are for models whose source is hf://org/repo[@revision][/path], or mirror://<model> of a mirror model added with --track",
			m.Name, mirror.RedactURL(m.Source))
	}
	mr := a.mirror
	if mr == nil {
		return nil, nil, nil, "", apiErr(http.StatusServiceUnavailable, "model %q: the mirror is not running", m.Name)
	}
	a.mu.Lock()
	f := a.v().fleets[m.Name]
	a.mu.Unlock()
	return m, f, mr, mm, nil
}

// updateModel answers POST /llm/models/<name>/update.
func (a *App) updateModel(w http.ResponseWriter, r *http.Request, m *catalog.Model, f *fleet.Fleet, mr *mirror.Mirror, mm string) error {
	a.shared.updatesMu.Lock()
	defer a.shared.updatesMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Minute)
	defer cancel()
	before, err := mr.Track(ctx, mm)
	if err != nil {
		return apiErr(http.StatusConflict, "model %q: %v; its weights are fetched (and followed) at its first start", m.Name, err)
	}
	u := a.checkUpdate(ctx, mr, m, mm, true)
	if u.Error != "" {
		return apiErr(http.StatusBadGateway, "model %q: %s; nothing was changed, its replicas keep serving version %s", m.Name, u.Error, before.Current)
	}
	if !u.UpdateAvailable {
		return apiErr(http.StatusConflict, "model %q: no update available: %s is at commit %s, the version it serves (%s)", m.Name, u.Repository, u.Available, u.Current)
	}
	res, err := mr.FetchUpdate(ctx, mm)
	if err != nil {
		return apiErr(http.StatusBadGateway, "model %q: fetching commit %s of %s into the mirror: %v; nothing was changed, its replicas keep serving version %s", m.Name, u.Available, u.Repository, err, before.Current)
	}
	to := res.Manifest.Version
	if err := a.switchVersion(ctx, mr, mm, to); err != nil {
		_ = mr.RestoreTrack(ctx, before)
		return apiErr(http.StatusBadGateway, "model %q: %v; nothing was changed, its replicas keep serving version %s", m.Name, err, before.Current)
	}
	a.audit(r, "model updated", zap.String("model", m.Name), zap.String("from", before.Current), zap.String("to", to),
		zap.String("commit", res.Manifest.Origin.Commit))
	return a.rollVersion(ctx, w, m, f, mr, mm, before, llmapi.VersionRollout{From: before.Current, To: to, FromCommit: u.CurrentCommit, ToCommit: res.Manifest.Origin.Commit})
}

// rollbackModel answers POST /llm/models/<name>/rollback.
func (a *App) rollbackModel(w http.ResponseWriter, r *http.Request, m *catalog.Model, f *fleet.Fleet, mr *mirror.Mirror, mm string) error {
	a.shared.updatesMu.Lock()
	defer a.shared.updatesMu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Minute)
	defer cancel()
	before, err := mr.Track(ctx, mm)
	if err != nil {
		return apiErr(http.StatusConflict, "model %q: %v; there is nothing to roll back", m.Name, err)
	}
	if before.Previous == "" || before.Previous == before.Current {
		return apiErr(http.StatusConflict, "model %q: no previous version to go back to; it serves %s, the first version it had", m.Name, before.Current)
	}
	if err := a.switchVersion(ctx, mr, mm, before.Previous); err != nil {
		_ = mr.RestoreTrack(ctx, before)
		return apiErr(http.StatusBadGateway, "model %q: going back to version %s: %v; nothing was changed, its replicas keep serving version %s", m.Name, before.Previous, err, before.Current)
	}
	a.audit(r, "model rolled back", zap.String("model", m.Name), zap.String("from", before.Current), zap.String("to", before.Previous))
	out := llmapi.VersionRollout{From: before.Current, To: before.Previous}
	if man, err := mr.Show(ctx, mm, before.Current); err == nil {
		out.FromCommit = man.Origin.Commit
	}
	if man, err := mr.Show(ctx, mm, before.Previous); err == nil {
		out.ToCommit = man.Origin.Commit
	}
	return a.rollVersion(ctx, w, m, f, mr, mm, before, out)
}

// switchVersion brings version to the node cache, checked against its
// manifest's sums, and makes it the mirror model's current one.
func (a *App) switchVersion(ctx context.Context, mr *mirror.Mirror, mm, version string) error {
	fe, err := mr.Fetch(ctx, mm, version)
	if err != nil {
		return fmt.Errorf("fetching version %s to the node: %w", version, err)
	}
	fe.Release()
	if _, err := mr.MakeCurrent(ctx, mm, version); err != nil {
		return fmt.Errorf("making version %s current: %w", version, err)
	}
	return nil
}

// rollVersion replaces the model's replicas, which start on the mirror
// model's new current version, and answers with the rollout. When the new
// replicas do not start, the track goes back to before.
func (a *App) rollVersion(ctx context.Context, w http.ResponseWriter, m *catalog.Model, f *fleet.Fleet, mr *mirror.Mirror, mm string, before mirror.Track, out llmapi.VersionRollout) error {
	out.Replaced, out.Started = []string{}, []string{}
	if f != nil || a.cluster != nil {
		n := 1
		if f != nil {
			n = max(f.ReplicaCount(), 1)
		}
		reason := fmt.Sprintf("its model moved from version %s to %s", out.From, out.To)
		var ro llmapi.Rollout
		var err error
		if a.cluster != nil {
			nodes := a.cluster.NodeCount()
			rctx, cancel := context.WithTimeout(ctx, time.Duration(nodes)*a.rollTimeout(n))
			defer cancel()
			ro, err = a.rollCluster(rctx, m, f, reason)
		} else {
			rctx, cancel := context.WithTimeout(ctx, a.rollTimeout(n))
			defer cancel()
			ro, err = f.Roll(rctx, reason)
		}
		out.Rollout = ro
		if f != nil {
			out.ModelStatus = f.Status()
		} else {
			out.ModelStatus = llmapi.ModelStatus{Name: m.Name}
		}
		if err != nil {
			rerr := mr.RestoreTrack(context.WithoutCancel(ctx), before)
			a.checkUpdate(ctx, mr, m, mm, false)
			back := "the current version is " + before.Current + " again"
			if rerr != nil {
				back = "the current version could not be set back to " + before.Current + ": " + rerr.Error()
			}
			return apiErr(http.StatusBadGateway, "model %q: %v; %s; replaced so far: %v, started: %v", m.Name, err, back, ro.Replaced, ro.Started)
		}
	}
	a.checkUpdate(ctx, mr, m, mm, false)
	if len(out.Started) == 0 {
		out.Note = "the model had no replica running; its next replicas start on version " + out.To
	}
	return writeJSON(w, out)
}
