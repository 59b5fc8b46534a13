package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Config configures a mirror.
type Config struct {
	// Stores hold the versions; with two, each is kept in step with the other.
	Stores []Store
	// CacheDir is the node's local cache of fetched versions.
	CacheDir string
	// CacheSize caps the node cache in bytes; 0 means no cap.
	CacheSize int64
	// WorkDir holds downloads in progress. Default: CacheDir/.work.
	WorkDir string
	// Registry is the base URL of the registry hf:// sources name.
	Registry string
	// RegistryToken is sent to the registry as a bearer token.
	RegistryToken string
	// HTTPClient fetches URLs and talks to the registry.
	HTTPClient *http.Client
	// DownloadAttempts bounds the tries of one download. Default: 5.
	DownloadAttempts int
	Logger           *zap.Logger
}

// Mirror keeps model versions in its stores and fetches them to the node.
type Mirror struct {
	cfg    Config
	stores []Store
	log    *zap.Logger
	tr     transfers
	cache  *Cache

	mu      sync.Mutex
	suspect map[string]bool // store + "\x00" + key whose bytes failed a check
	status  SyncStatus
	writing sync.Map // store + "\x00" + model/version → *sync.Mutex
}

// lockVersion keeps an add and a reconciliation from writing one version
// to one store at once.
func (m *Mirror) lockVersion(s Store, id string) func() {
	v, _ := m.writing.LoadOrStore(s.Name()+"\x00"+id, new(sync.Mutex))
	mu := v.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// New makes a mirror. It contacts no store.
func New(cfg Config) (*Mirror, error) {
	if len(cfg.Stores) == 0 {
		return nil, errors.New("the mirror needs at least one store")
	}
	seen := map[string]bool{}
	for _, s := range cfg.Stores {
		if seen[s.Name()] {
			return nil, fmt.Errorf("store name %q is used twice", s.Name())
		}
		seen[s.Name()] = true
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport}
	}
	if cfg.DownloadAttempts <= 0 {
		cfg.DownloadAttempts = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.WorkDir == "" && cfg.CacheDir != "" {
		cfg.WorkDir = cfg.CacheDir + "/.work"
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = os.TempDir() + "/llmgw-mirror"
	}
	m := &Mirror{cfg: cfg, stores: cfg.Stores, log: cfg.Logger, suspect: map[string]bool{}}
	if cfg.CacheDir != "" {
		c, err := newCache(m, cfg.CacheDir, cfg.CacheSize)
		if err != nil {
			return nil, err
		}
		m.cache = c
	}
	return m, nil
}

// Stores lists the mirror's stores.
func (m *Mirror) Stores() []Store { return m.stores }

// Transfers lists the transfers under way.
func (m *Mirror) Transfers() []Progress { return m.tr.list() }

// AddOptions says what to add.
type AddOptions struct {
	Model string
	// Version names the version. Default: the registry commit's first 12
	// digits, or a hash of the contents.
	Version string
	// Source is a local path, an http(s) URL or hf://org/repo[@rev][/path].
	Source string
	// AllowPickle lets pickle formats in.
	AllowPickle bool
	// Track records a registry source for updates and makes the version current.
	Track bool
}

// AddResult says where a version was stored.
type AddResult struct {
	Manifest Manifest            `json:"manifest"`
	Stored   []string            `json:"stored"`
	Pending  map[string]string   `json:"pending,omitempty"` // store → why it has not got it yet
	Stats    map[string]PutStats `json:"stats"`
}

// Add stores a version from a source on every store that answers. Stores
// that do not get it from the others at the next sync; if none answers,
// Add fails and the staged download is kept for the next try.
func (m *Mirror) Add(ctx context.Context, o AddOptions) (*AddResult, error) {
	if err := CheckName("model", o.Model); err != nil {
		return nil, err
	}
	if o.Version != "" {
		if err := CheckName("version", o.Version); err != nil {
			return nil, err
		}
	}
	r, err := m.resolve(ctx, o.Model, o.Source)
	if err != nil {
		return nil, err
	}
	if err := m.checkPickle(r.files, o.AllowPickle); err != nil {
		return nil, err
	}
	man := Manifest{Model: o.Model, Version: o.Version, Origin: r.origin, Added: now().UTC(), AllowPickle: o.AllowPickle}
	for _, f := range r.files {
		man.Files = append(man.Files, f.File)
	}
	sort.Slice(man.Files, func(i, j int) bool { return man.Files[i].Path < man.Files[j].Path })
	man.Format = formatOf(man.Files)
	if man.Version == "" {
		man.Version = r.version
	}
	// Sums of local files come from the upload, in the same pass; they are
	// read first only when the version is named after its contents or a
	// version of that name exists to compare with.
	if man.Version == "" || m.exists(ctx, o.Model, man.Version) {
		if err := hashUnknown(ctx, r.files, man.Files); err != nil {
			return nil, err
		}
	}
	if man.Version == "" {
		man.Version = contentVersion(man.Files)
	}
	if t, err := m.tombstone(ctx, o.Model, man.Version); err == nil {
		return nil, fmt.Errorf("version %s/%s was removed on %s; add it under another version name", o.Model, man.Version, t.Removed.Format(time.RFC3339))
	}
	res := &AddResult{Pending: map[string]string{}, Stats: map[string]PutStats{}}
	var stored []Manifest
	for _, s := range m.stores {
		got, stats, err := m.storeVersion(ctx, s, &man, func(f File) (ReadAtCloser, error) {
			for _, sf := range r.files {
				if sf.Path == f.Path {
					return os.Open(sf.local)
				}
			}
			return nil, fmt.Errorf("no source for %s", f.Path)
		}, "add")
		res.Stats[s.Name()] = stats
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			m.log.Warn("version not stored", zap.String("store", s.Name()), zap.String("model", o.Model), zap.String("version", man.Version), zap.Error(err))
			res.Pending[s.Name()] = err.Error()
			continue
		}
		stored = append(stored, got)
		res.Stored = append(res.Stored, s.Name())
	}
	if len(res.Stored) == 0 {
		var msgs []string
		for s, e := range res.Pending {
			msgs = append(msgs, s+": "+e)
		}
		sort.Strings(msgs)
		return nil, fmt.Errorf("no store took %s/%s: %s", o.Model, man.Version, strings.Join(msgs, "; "))
	}
	res.Manifest = stored[0]
	for _, f := range r.files {
		if f.staged {
			os.Remove(f.local)
		}
	}
	if o.Track {
		if _, err := m.setCurrent(ctx, o.Model, man.Version, o.Source); err != nil {
			return res, err
		}
	}
	m.log.Info("version added", zap.String("model", o.Model), zap.String("version", man.Version),
		zap.Int64("bytes", man.Size()), zap.Strings("stored", res.Stored))
	return res, nil
}

// PendingError is the message for stores that did not take a version.
func (r *AddResult) PendingError() error {
	if len(r.Pending) == 0 {
		return nil
	}
	var msgs []string
	for s, e := range r.Pending {
		msgs = append(msgs, fmt.Sprintf("%s; the version was stored on %s and will be copied when %s answers", e, strings.Join(r.Stored, ", "), s))
	}
	sort.Strings(msgs)
	return errors.New(strings.Join(msgs, "\n"))
}

func (m *Mirror) checkPickle(files []srcFile, allow bool) error {
	if allow {
		return nil
	}
	for _, f := range files {
		if isPickle(f.Path) {
			return fmt.Errorf("%s is a pickle format, which can run code when it is loaded; use safetensors or GGUF weights, or allow pickle for this model (allow_pickle, --allow-pickle)", f.Path)
		}
	}
	return nil
}

// storeVersion puts a version's files on a store, then its manifest: a
// version counts as stored only once its manifest is there. If the store
// already holds the version, its manifest is what is returned.
//
// Files whose sum is not known yet get it from the store's Put, which
// computes it in the same pass; the manifest is written with it.
func (m *Mirror) storeVersion(ctx context.Context, s Store, man *Manifest, open func(File) (ReadAtCloser, error), kind string) (Manifest, PutStats, error) {
	var total PutStats
	if err := s.Ping(ctx); err != nil {
		return *man, total, err
	}
	defer m.lockVersion(s, man.Model+"/"+man.Version)()
	if old, err := m.readManifest(ctx, s, man.Model, man.Version); err == nil {
		if !sameFiles(old.Files, man.Files) {
			return *man, total, fmt.Errorf("store %s already holds %s/%s with other files; add it under another version name", s.Name(), man.Model, man.Version)
		}
		return old, total, nil
	}
	for i := range man.Files {
		f := &man.Files[i]
		key := fileKey(man.Model, man.Version, f.Path)
		// A file of an earlier, interrupted try is kept when its size
		// matches a known sum (a deep sync reads it). Without a known sum
		// it is sent again; parts of an unfinished upload still resume.
		if o, err := s.Stat(ctx, key); err == nil && f.SHA256 != "" && o.Size == f.Size && !m.isSuspect(s, key) {
			continue
		}
		src, err := open(*f)
		if err != nil {
			return *man, total, err
		}
		t := m.tr.start(&Transfer{Kind: kind, Model: man.Model, Version: man.Version, File: f.Path, Store: s.Name(), Total: f.Size})
		stop := m.logProgress(t)
		stats, err := s.Put(ctx, key, src, f.Size, f.SHA256, t)
		stop()
		m.tr.end(t)
		src.Close()
		total.add(stats)
		if err != nil {
			return *man, total, err
		}
		if f.SHA256 == "" {
			f.SHA256 = stats.SHA256
		}
		if f.BLAKE3 == "" { // Put checked the SHA-256: the same bytes
			f.BLAKE3 = stats.BLAKE3
		}
		m.clearSuspect(s, key)
	}
	data, _ := json.MarshalIndent(man, "", "  ")
	if err := s.PutSmall(ctx, manifestKey(man.Model, man.Version), data); err != nil {
		return *man, total, err
	}
	return *man, total, nil
}

// exists says whether any store holds a manifest of model/version.
func (m *Mirror) exists(ctx context.Context, model, version string) bool {
	for _, s := range m.stores {
		if _, err := s.Stat(ctx, manifestKey(model, version)); err == nil {
			return true
		}
	}
	return false
}

// hashUnknown reads the sums the source did not give.
func hashUnknown(ctx context.Context, src []srcFile, files []File) error {
	for i := range files {
		if files[i].SHA256 != "" {
			continue
		}
		for _, sf := range src {
			if sf.Path == files[i].Path {
				sum, _, err := hashFile(ctx, sf.local)
				if err != nil {
					return err
				}
				files[i].SHA256 = sum
			}
		}
	}
	return nil
}

func sameFiles(a, b []File) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a { // a manifest written before BLAKE3 sums is the same
		if a[i].Path != b[i].Path || a[i].Size != b[i].Size || a[i].SHA256 != b[i].SHA256 {
			return false
		}
	}
	return true
}

// logProgress logs a long transfer every 10 seconds until stopped.
func (m *Mirror) logProgress(t *Transfer) func() {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				p := t.Snapshot()
				m.log.Info("transfer progress", zap.String("kind", p.Kind), zap.String("model", p.Model), zap.String("version", p.Version),
					zap.String("file", p.File), zap.String("store", p.Store), zap.Int64("bytes", p.Bytes), zap.Int64("total", p.Total),
					zap.Float64("bytes_per_second", p.Rate), zap.Float64("eta_seconds", p.ETA))
			}
		}
	}()
	return func() { close(done) }
}

func (m *Mirror) readManifest(ctx context.Context, s Store, model, version string) (Manifest, error) {
	var man Manifest
	err := readJSON(ctx, s, manifestKey(model, version), &man)
	return man, err
}

func readJSON(ctx context.Context, s Store, key string, v any) error {
	rc, err := s.Open(ctx, key, 0)
	if err != nil {
		return err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, 16<<20))
	if err != nil {
		return fmt.Errorf("store %s: reading %s: %w", s.Name(), key, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("store %s: %s is not valid: %w", s.Name(), key, err)
	}
	return nil
}

// tombstone finds a version's tombstone on any store.
func (m *Mirror) tombstone(ctx context.Context, model, version string) (Tombstone, error) {
	var t Tombstone
	for _, s := range m.stores {
		if err := readJSON(ctx, s, tombKey(model, version), &t); err == nil {
			return t, nil
		}
	}
	return t, ErrNotFound
}

// VersionInfo is a version as listed.
type VersionInfo struct {
	Model   string    `json:"model"`
	Version string    `json:"version"`
	Format  string    `json:"format"`
	Files   int       `json:"files"`
	Size    int64     `json:"size"`
	Added   time.Time `json:"added"`
	Origin  Origin    `json:"origin"`
	// Stores that hold the version's manifest.
	Stores  []string `json:"stores"`
	Current bool     `json:"current,omitempty"`
}

// List lists the versions on every store that answers, with the stores
// that hold each. Stores that do not answer are named in the error, which
// comes with whatever the others gave.
func (m *Mirror) List(ctx context.Context) ([]VersionInfo, error) {
	byID := map[string]*VersionInfo{}
	var errs []error
	for _, s := range m.stores {
		objs, err := s.List(ctx, "models/")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, o := range objs {
			model, version, ok := parseManifestKey(o.Key)
			if !ok {
				continue
			}
			id := model + "/" + version
			if vi := byID[id]; vi != nil {
				vi.Stores = append(vi.Stores, s.Name())
				continue
			}
			man, err := m.readManifest(ctx, s, model, version)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			byID[id] = &VersionInfo{Model: model, Version: version, Format: man.Format, Files: len(man.Files), Size: man.Size(),
				Added: man.Added, Origin: man.Origin, Stores: []string{s.Name()}}
		}
	}
	out := make([]VersionInfo, 0, len(byID))
	currents := map[string]string{}
	for _, vi := range byID {
		cur, ok := currents[vi.Model]
		if !ok {
			cur, _ = m.Current(ctx, vi.Model)
			currents[vi.Model] = cur
		}
		vi.Current = cur == vi.Version
		out = append(out, *vi)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].Added.Before(out[j].Added)
	})
	return out, errors.Join(errs...)
}

// Show reads a version's manifest from whichever store answers.
func (m *Mirror) Show(ctx context.Context, model, version string) (Manifest, error) {
	var errs []error
	for _, s := range m.stores {
		man, err := m.readManifest(ctx, s, model, version)
		if err == nil {
			return man, nil
		}
		errs = append(errs, err)
	}
	if allNotFound(errs) {
		return Manifest{}, fmt.Errorf("version %s/%s: %w", model, version, ErrNotFound)
	}
	return Manifest{}, errors.Join(errs...)
}

func allNotFound(errs []error) bool {
	for _, e := range errs {
		if !errors.Is(e, ErrNotFound) {
			return false
		}
	}
	return true
}

// FileCheck is the outcome of checking one file on one store.
type FileCheck struct {
	Store string `json:"store"`
	File  string `json:"file"`
	// Status is ok, missing, wrong_size, checksum_mismatch or unreachable.
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// Verify reads every file of a version on every store and checks its size
// and sum (BLAKE3 where the manifest has it, else SHA-256). Bad copies are marked, so that a fetch passes them over and
// the next sync repairs them.
func (m *Mirror) Verify(ctx context.Context, model, version string) ([]FileCheck, error) {
	man, err := m.Show(ctx, model, version)
	if err != nil {
		return nil, err
	}
	var out []FileCheck
	for _, s := range m.stores {
		for _, f := range man.Files {
			out = append(out, m.checkFile(ctx, s, man, f))
		}
	}
	return out, nil
}

func (m *Mirror) checkFile(ctx context.Context, s Store, man Manifest, f File) FileCheck {
	key := fileKey(man.Model, man.Version, f.Path)
	c := FileCheck{Store: s.Name(), File: f.Path, Status: "ok"}
	o, err := s.Stat(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		c.Status = "missing"
		return c
	case err != nil:
		c.Status, c.Detail = "unreachable", err.Error()
		return c
	case o.Size != f.Size:
		c.Status, c.Detail = "wrong_size", fmt.Sprintf("%d bytes, want %d", o.Size, f.Size)
		m.markSuspect(s, key)
		return c
	}
	h, want, algo := f.checker()
	sum, err := hashObject(ctx, s, key, h)
	switch {
	case err != nil:
		c.Status, c.Detail = "unreachable", err.Error()
	case sum != want:
		c.Status, c.Detail = "checksum_mismatch", fmt.Sprintf("%s %s, want %s", algo, sum, want)
		m.markSuspect(s, key)
		m.log.Error("stored file is corrupt", zap.String("store", s.Name()), zap.String("model", man.Model),
			zap.String("version", man.Version), zap.String("file", f.Path))
	default:
		m.clearSuspect(s, key)
	}
	return c
}

func (m *Mirror) markSuspect(s Store, key string) {
	m.mu.Lock()
	m.suspect[s.Name()+"\x00"+key] = true
	m.mu.Unlock()
}

func (m *Mirror) clearSuspect(s Store, key string) {
	m.mu.Lock()
	delete(m.suspect, s.Name()+"\x00"+key)
	m.mu.Unlock()
}

func (m *Mirror) isSuspect(s Store, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.suspect[s.Name()+"\x00"+key]
}

// RemoveResult says where a removal applied.
type RemoveResult struct {
	Removed []string          `json:"removed"`
	Pending map[string]string `json:"pending,omitempty"`
}

// Remove removes a version: a tombstone is written to every store that
// answers and the version's objects are deleted there; stores that do not
// answer learn of it at the next sync. The version leaves the node cache
// unless a replica uses it.
func (m *Mirror) Remove(ctx context.Context, model, version, by string) (*RemoveResult, error) {
	if _, err := m.Show(ctx, model, version); err != nil {
		if _, terr := m.tombstone(ctx, model, version); terr == nil {
			return nil, fmt.Errorf("version %s/%s is already removed", model, version)
		}
		return nil, err
	}
	t := Tombstone{Model: model, Version: version, Removed: now().UTC(), By: by}
	res := &RemoveResult{Pending: map[string]string{}}
	for _, s := range m.stores {
		if err := m.bury(ctx, s, t); err != nil {
			res.Pending[s.Name()] = err.Error()
			continue
		}
		res.Removed = append(res.Removed, s.Name())
	}
	if len(res.Removed) == 0 {
		return res, fmt.Errorf("no store answered; %s/%s is not removed", model, version)
	}
	if m.cache != nil {
		m.cache.evictVersion(model, version)
	}
	m.log.Info("version removed", zap.String("model", model), zap.String("version", version), zap.String("by", by), zap.Strings("stores", res.Removed))
	return res, nil
}

// bury writes a tombstone and deletes the version's objects, manifest first.
func (m *Mirror) bury(ctx context.Context, s Store, t Tombstone) error {
	data, _ := json.MarshalIndent(t, "", "  ")
	if err := s.PutSmall(ctx, tombKey(t.Model, t.Version), data); err != nil {
		return err
	}
	if err := s.Delete(ctx, manifestKey(t.Model, t.Version)); err != nil {
		return err
	}
	objs, err := s.List(ctx, versionPrefix(t.Model, t.Version))
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := s.Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	return nil
}

// Purge removes every version of a model except those keep says another
// model still uses.
func (m *Mirror) Purge(ctx context.Context, model, by string, keep func(version string) bool) ([]string, error) {
	list, err := m.List(ctx)
	if err != nil && len(list) == 0 {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, v := range list {
		if v.Model != model || (keep != nil && keep(v.Version)) {
			continue
		}
		if _, err := m.Remove(ctx, model, v.Version, by); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, v.Version)
	}
	if len(removed) > 0 {
		for _, s := range m.stores {
			_ = s.Delete(ctx, trackKey(model))
		}
	}
	return removed, errors.Join(errs...)
}

// Current is a model's current version: the one its track names, or else
// the most recently added.
func (m *Mirror) Current(ctx context.Context, model string) (string, error) {
	if t, err := m.track(ctx, model); err == nil && t.Current != "" {
		return t.Current, nil
	}
	var best Manifest
	for _, s := range m.stores {
		objs, err := s.List(ctx, "models/"+model+"/")
		if err != nil {
			continue
		}
		for _, o := range objs {
			mod, ver, ok := parseManifestKey(o.Key)
			if !ok || mod != model {
				continue
			}
			man, err := m.readManifest(ctx, s, mod, ver)
			if err == nil && (best.Version == "" || man.Added.After(best.Added)) {
				best = man
			}
		}
	}
	if best.Version == "" {
		return "", fmt.Errorf("model %s has no version in the mirror: %w", model, ErrNotFound)
	}
	return best.Version, nil
}

// track reads a model's track from the store with the newest one.
func (m *Mirror) track(ctx context.Context, model string) (Track, error) {
	var best Track
	found := false
	for _, s := range m.stores {
		var t Track
		if err := readJSON(ctx, s, trackKey(model), &t); err == nil && (!found || t.Updated.After(best.Updated)) {
			best, found = t, true
		}
	}
	if !found {
		return best, ErrNotFound
	}
	return best, nil
}

// setCurrent makes version current for model, keeping the one before.
func (m *Mirror) setCurrent(ctx context.Context, model, version, source string) (Track, error) {
	t, _ := m.track(ctx, model)
	if t.Current != version {
		t.Previous = t.Current
	}
	t.Model, t.Current, t.Updated = model, version, now().UTC()
	if source != "" {
		t.Source = source
	}
	data, _ := json.MarshalIndent(t, "", "  ")
	var errs []error
	ok := 0
	for _, s := range m.stores {
		if err := s.PutSmall(ctx, trackKey(model), data); err != nil {
			errs = append(errs, err)
			continue
		}
		ok++
	}
	if ok == 0 {
		return t, errors.Join(errs...)
	}
	return t, nil
}

// Update says whether a tracked model's repository moved on.
type Update struct {
	Model   string `json:"model"`
	Source  string `json:"source"`
	Current string `json:"current"`
	Commit  string `json:"commit"`
	Latest  string `json:"latest"`
	Moved   bool   `json:"moved"`
}

// Tracks lists the models that follow a registry repository.
func (m *Mirror) Tracks(ctx context.Context) ([]Track, error) {
	names := map[string]bool{}
	for _, s := range m.stores {
		objs, err := s.List(ctx, "tracks/")
		if err != nil {
			continue
		}
		for _, o := range objs {
			names[strings.TrimSuffix(strings.TrimPrefix(o.Key, "tracks/"), ".json")] = true
		}
	}
	var out []Track
	for n := range names {
		if t, err := m.track(ctx, n); err == nil {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out, nil
}

// Updates asks the registry, for every tracked model, whether its revision
// now points at another commit.
func (m *Mirror) Updates(ctx context.Context) ([]Update, error) {
	tracks, err := m.Tracks(ctx)
	if err != nil {
		return nil, err
	}
	var out []Update
	var errs []error
	for _, t := range tracks {
		if !strings.HasPrefix(t.Source, "hf://") {
			continue
		}
		u, err := m.checkTrack(ctx, t)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.Model, err))
			continue
		}
		out = append(out, u)
	}
	return out, errors.Join(errs...)
}

// ErrNotTracked is returned for a model that follows no registry
// repository.
var ErrNotTracked = errors.New("follows no registry repository")

// Track is a model's track: the repository it follows, its current and
// previous versions. It fails with ErrNotTracked when it has none.
func (m *Mirror) Track(ctx context.Context, model string) (Track, error) {
	t, err := m.track(ctx, model)
	if err != nil || !strings.HasPrefix(t.Source, "hf://") {
		return t, fmt.Errorf("model %s %w", model, ErrNotTracked)
	}
	return t, nil
}

// CheckUpdate asks the registry whether one tracked model's revision now
// points at another commit than its current version's.
func (m *Mirror) CheckUpdate(ctx context.Context, model string) (Update, error) {
	t, err := m.Track(ctx, model)
	if err != nil {
		return Update{Model: model}, err
	}
	return m.checkTrack(ctx, t)
}

func (m *Mirror) checkTrack(ctx context.Context, t Track) (Update, error) {
	u := Update{Model: t.Model, Source: t.Source, Current: t.Current}
	ref, err := ParseRegistryRef(t.Source)
	if err != nil {
		return u, err
	}
	if man, err := m.Show(ctx, t.Model, t.Current); err == nil {
		u.Commit = man.Origin.Commit
	}
	latest, err := m.Commit(ctx, ref)
	if err != nil {
		return u, err
	}
	u.Latest = latest
	u.Moved = latest != u.Commit
	return u, nil
}

// UpdateModel fetches the new revision of a tracked model beside the old
// one and makes it current.
func (m *Mirror) UpdateModel(ctx context.Context, model string) (*AddResult, error) {
	res, err := m.FetchUpdate(ctx, model)
	if err != nil {
		return nil, err
	}
	if _, err := m.MakeCurrent(ctx, model, res.Manifest.Version); err != nil {
		return res, err
	}
	return res, nil
}

// FetchUpdate stores the revision a tracked model's repository points at
// now beside its other versions, checked against the registry's sums,
// without making it current.
func (m *Mirror) FetchUpdate(ctx context.Context, model string) (*AddResult, error) {
	t, err := m.track(ctx, model)
	if err != nil {
		return nil, fmt.Errorf("model %s follows no repository; add it with --track from an hf:// source", model)
	}
	return m.Add(ctx, AddOptions{Model: model, Source: t.Source, AllowPickle: false})
}

// MakeCurrent makes a stored version a model's current one; the one
// before becomes its previous.
func (m *Mirror) MakeCurrent(ctx context.Context, model, version string) (Track, error) {
	if _, err := m.Show(ctx, model, version); err != nil {
		return Track{}, fmt.Errorf("version %s/%s: %w", model, version, err)
	}
	return m.setCurrent(ctx, model, version, "")
}

// RestoreTrack writes a track back as it was (after a change that could
// not be carried out).
func (m *Mirror) RestoreTrack(ctx context.Context, t Track) error {
	t.Updated = now().UTC()
	data, _ := json.MarshalIndent(t, "", "  ")
	var errs []error
	for _, s := range m.stores {
		if err := s.PutSmall(ctx, trackKey(t.Model), data); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == len(m.stores) {
		return errors.Join(errs...)
	}
	return nil
}

// Rollback makes a model's previous version current again.
func (m *Mirror) Rollback(ctx context.Context, model string) (Track, error) {
	t, err := m.track(ctx, model)
	if err != nil || t.Previous == "" {
		return t, fmt.Errorf("model %s has no previous version to go back to", model)
	}
	if _, err := m.Show(ctx, model, t.Previous); err != nil {
		return t, fmt.Errorf("previous version %s/%s: %w", model, t.Previous, err)
	}
	return m.setCurrent(ctx, model, t.Previous, "")
}
