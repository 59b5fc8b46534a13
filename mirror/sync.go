package mirror

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
)

// SyncStatus is what the last reconciliation found.
type SyncStatus struct {
	LastRun  time.Time     `json:"last_run"`
	Duration float64       `json:"duration_seconds"`
	Stores   []StoreStatus `json:"stores"`
}

// StoreStatus is one store's state after a reconciliation.
type StoreStatus struct {
	Name      string `json:"name"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error,omitempty"`
	// Versions the store holds.
	Versions int `json:"versions"`
	// Lag is what the store still lacks after the run: versions and bytes
	// to copy, removals to apply.
	LagVersions int   `json:"lag_versions"`
	LagBytes    int64 `json:"lag_bytes"`
	LagRemovals int   `json:"lag_removals"`
}

// SyncReport says what a reconciliation did.
type SyncReport struct {
	Copied   []string `json:"copied,omitempty"`   // model/version → store
	Removed  []string `json:"removed,omitempty"`  // model/version on store
	Repaired []string `json:"repaired,omitempty"` // store:key
	Errors   []string `json:"errors,omitempty"`
	Stats    PutStats `json:"stats"`
}

// Status is the state the last reconciliation left.
func (m *Mirror) Status() SyncStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.status
	st.Stores = append([]StoreStatus(nil), st.Stores...)
	return st
}

type storeView struct {
	s      Store
	err    error
	objs   map[string]int64 // key → size
	mans   map[string]bool  // model/version with a manifest
	tombs  map[string]bool
	tracks map[string]bool
	status *StoreStatus
}

// Sync reconciles the stores: removals recorded on any store are applied
// on all; versions any store holds are copied, checked against their
// sha256, to the stores that lack them; files marked bad are replaced by a
// good copy; tracks follow the newest. With deep, every stored file is
// read and checked first. Unreachable stores are skipped and reported.
func (m *Mirror) Sync(ctx context.Context, deep bool) (*SyncReport, error) {
	start := now()
	rep := &SyncReport{}
	views := make([]*storeView, len(m.stores))
	for i, s := range m.stores {
		v := &storeView{s: s, objs: map[string]int64{}, mans: map[string]bool{}, tombs: map[string]bool{}, tracks: map[string]bool{},
			status: &StoreStatus{Name: s.Name()}}
		views[i] = v
		if v.err = s.Ping(ctx); v.err == nil {
			var objs []Object
			objs, v.err = s.List(ctx, "")
			for _, o := range objs {
				v.objs[o.Key] = o.Size
				if model, version, ok := parseManifestKey(o.Key); ok {
					v.mans[model+"/"+version] = true
				} else if rest, ok := strings.CutPrefix(o.Key, "tombstones/"); ok {
					v.tombs[strings.TrimSuffix(rest, ".json")] = true
				} else if rest, ok := strings.CutPrefix(o.Key, "tracks/"); ok {
					v.tracks[strings.TrimSuffix(rest, ".json")] = true
				}
			}
		}
		if v.err != nil {
			v.status.Error = v.err.Error()
			rep.Errors = append(rep.Errors, v.err.Error())
		} else {
			v.status.Reachable = true
		}
	}
	up := func(yield func(*storeView) bool) {
		for _, v := range views {
			if v.err == nil && !yield(v) {
				return
			}
		}
	}

	// Removals travel first, so nothing removed is copied back.
	tombs := map[string]Tombstone{}
	for v := range up {
		for id := range v.tombs {
			if _, ok := tombs[id]; ok {
				continue
			}
			var t Tombstone
			if err := readJSON(ctx, v.s, "tombstones/"+id+".json", &t); err == nil {
				tombs[id] = t
			}
		}
	}
	for id, t := range tombs {
		for v := range up {
			if v.tombs[id] && !v.hasUnder(versionPrefix(t.Model, t.Version)) {
				continue
			}
			if err := m.bury(ctx, v.s, t); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
				v.status.LagRemovals++
				continue
			}
			rep.Removed = append(rep.Removed, id+" on "+v.s.Name())
			delete(v.mans, id)
		}
	}
	for _, v := range views {
		if v.err != nil {
			for id := range tombs {
				if !v.tombs[id] {
					v.status.LagRemovals++
				}
			}
		}
	}

	// Versions: every store gets what any store holds.
	ids := map[string]bool{}
	for v := range up {
		for id := range v.mans {
			if _, gone := tombs[id]; !gone {
				ids[id] = true
			}
		}
	}
	sorted := make([]string, 0, len(ids))
	for id := range ids {
		sorted = append(sorted, id)
	}
	sort.Strings(sorted)
	for _, id := range sorted {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var man Manifest
		var holders []*storeView
		for v := range up {
			if v.mans[id] {
				holders = append(holders, v)
				if man.Version == "" {
					model, version, _ := strings.Cut(id, "/")
					if mm, err := m.readManifest(ctx, v.s, model, version); err == nil {
						man = mm
					}
				}
			}
		}
		if man.Version == "" {
			continue
		}
		if deep {
			for _, h := range holders {
				for _, f := range man.Files {
					m.checkFile(ctx, h.s, man, f)
				}
			}
		}
		for _, v := range views {
			if v.err != nil {
				if !v.mans[id] {
					v.status.LagVersions++
					v.status.LagBytes += man.Size()
				}
				continue
			}
			unlock := m.lockVersion(v.s, id)
			stats, changed, err := m.bringUp(ctx, v, man, holders)
			unlock()
			rep.Stats.add(stats)
			if err != nil {
				rep.Errors = append(rep.Errors, err.Error())
				v.status.LagVersions++
				v.status.LagBytes += man.Size()
				continue
			}
			if changed.copied {
				rep.Copied = append(rep.Copied, id+" → "+v.s.Name())
			}
			for _, k := range changed.repaired {
				rep.Repaired = append(rep.Repaired, v.s.Name()+":"+k)
			}
		}
	}

	// Tracks: the newest wins everywhere.
	names := map[string]bool{}
	for v := range up {
		for n := range v.tracks {
			names[n] = true
		}
	}
	for n := range names {
		t, err := m.track(ctx, n)
		if err != nil {
			continue
		}
		data, _ := json.MarshalIndent(t, "", "  ")
		for v := range up {
			var have Track
			if readJSON(ctx, v.s, trackKey(n), &have) == nil && !have.Updated.Before(t.Updated) {
				continue
			}
			if err := v.s.PutSmall(ctx, trackKey(n), data); err != nil {
				rep.Errors = append(rep.Errors, err.Error())
			}
		}
	}

	st := SyncStatus{LastRun: start, Duration: now().Sub(start).Seconds()}
	for _, v := range views {
		v.status.Versions = len(v.mans)
		st.Stores = append(st.Stores, *v.status)
	}
	m.mu.Lock()
	m.status = st
	m.mu.Unlock()
	if len(rep.Copied)+len(rep.Removed)+len(rep.Repaired) > 0 {
		m.log.Info("stores reconciled", zap.Strings("copied", rep.Copied), zap.Strings("removed", rep.Removed), zap.Strings("repaired", rep.Repaired))
	}
	if len(rep.Errors) > 0 {
		return rep, errors.New(strings.Join(rep.Errors, "; "))
	}
	return rep, nil
}

func (v *storeView) hasUnder(prefix string) bool {
	for k := range v.objs {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

type changes struct {
	copied   bool
	repaired []string
}

// bringUp makes store v hold a good copy of every file of man, then the
// manifest. Files come from the holders that have a good copy.
func (m *Mirror) bringUp(ctx context.Context, v *storeView, man Manifest, holders []*storeView) (PutStats, changes, error) {
	var total PutStats
	var ch changes
	id := man.Model + "/" + man.Version
	for _, f := range man.Files {
		key := fileKey(man.Model, man.Version, f.Path)
		size, ok := v.objs[key]
		bad := ok && (size != f.Size || m.isSuspect(v.s, key))
		if ok && !bad {
			continue
		}
		if bad {
			// Put would resume a half-done upload; the bad object goes first.
			if err := v.s.Delete(ctx, key); err != nil {
				return total, ch, err
			}
		}
		stats, err := m.copyFile(ctx, v.s, man, f, holders)
		total.add(stats)
		if err != nil {
			return total, ch, fmt.Errorf("copying %s/%s to %s: %w", id, f.Path, v.s.Name(), err)
		}
		v.objs[key] = f.Size
		if bad {
			ch.repaired = append(ch.repaired, key)
			m.log.Info("bad copy repaired", zap.String("store", v.s.Name()), zap.String("model", man.Model), zap.String("version", man.Version), zap.String("file", f.Path))
		} else {
			ch.copied = true
		}
	}
	if !v.mans[id] {
		data, _ := json.MarshalIndent(man, "", "  ")
		if err := v.s.PutSmall(ctx, manifestKey(man.Model, man.Version), data); err != nil {
			return total, ch, err
		}
		v.mans[id] = true
		ch.copied = true
	}
	return total, ch, nil
}

// copyFile copies one file to dst from the first holder whose copy checks
// out; a holder whose bytes do not match is marked bad and passed over.
func (m *Mirror) copyFile(ctx context.Context, dst Store, man Manifest, f File, holders []*storeView) (PutStats, error) {
	key := fileKey(man.Model, man.Version, f.Path)
	var errs []error
	for _, h := range holders {
		if h.s == dst {
			continue
		}
		if size, ok := h.objs[key]; !ok || size != f.Size || m.isSuspect(h.s, key) {
			continue
		}
		src, err := h.s.ReaderAt(ctx, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		t := m.tr.start(&Transfer{Kind: "copy", Model: man.Model, Version: man.Version, File: f.Path, Store: dst.Name(), Total: f.Size})
		stop := m.logProgress(t)
		stats, err := dst.Put(ctx, key, src, f.Size, f.SHA256, t)
		stop()
		m.tr.end(t)
		src.Close()
		if err == nil {
			m.clearSuspect(dst, key)
			return stats, nil
		}
		if errors.Is(err, ErrChecksum) {
			m.markSuspect(h.s, key)
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return PutStats{}, errors.New("no store holds a good copy")
	}
	return PutStats{}, errors.Join(errs...)
}

// hashObject reads a stored object through h and returns its sum.
func hashObject(ctx context.Context, s Store, key string, h hash.Hash) (string, error) {
	rc, err := s.Open(ctx, key, 0)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	if _, err := io.Copy(h, ctxReader{ctx, rc}); err != nil {
		return "", fmt.Errorf("store %s: reading %s: %w", s.Name(), key, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Run reconciles the stores every interval, reading every file every
// deepEvery runs (0: never), until ctx ends.
func (m *Mirror) Run(ctx context.Context, interval time.Duration, deepEvery int) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("mirror reconciliation panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	last := ""
	for n := 1; ; n++ {
		deep := deepEvery > 0 && n%deepEvery == 0
		_, err := m.Sync(ctx, deep)
		if ctx.Err() != nil {
			return
		}
		// Logged when the trouble starts or changes, not every interval.
		switch {
		case err != nil && err.Error() != last:
			last = err.Error()
			m.log.Warn("reconciliation incomplete", zap.Error(err))
		case err == nil && last != "":
			last = ""
			m.log.Info("stores in step again")
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
