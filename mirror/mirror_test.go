package mirror

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/mirror/s3test"
	"github.com/zeebo/blake3"
)

// writeRandom writes n deterministic pseudo-random bytes to a new file.
func writeRandom(t testing.TB, dir, name string, n int64, seed uint64) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := rand.New(rand.NewPCG(seed, seed+1))
	buf := make([]byte, 1<<20)
	for left := n; left > 0; {
		k := min(int64(len(buf)), left)
		for i := 0; i < int(k); i += 8 {
			v := r.Uint64()
			for j := 0; j < 8 && i+j < int(k); j++ {
				buf[i+j] = byte(v >> (8 * j))
			}
		}
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		left -= k
	}
	return p
}

func sumFile(t testing.TB, p string) string {
	t.Helper()
	sum, _, err := hashFile(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func s3Store(t testing.TB, name string, srv *s3test.Server, partSize int64) *S3Store {
	t.Helper()
	s, err := NewS3Store(name, S3Config{Endpoint: srv.Endpoint(), Bucket: "weights", Prefix: "llmgw", AccessKey: s3test.AccessKey,
		SecretKey: s3test.SecretKey, Region: "us-east-1", PartSize: partSize})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newMirror(t testing.TB, stores ...Store) *Mirror {
	t.Helper()
	m, err := New(Config{Stores: stores, CacheDir: t.TempDir(), WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestAddListVerifyFetch(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	m := newMirror(t, s3Store(t, "s3-a", a, 0), s3Store(t, "s3-b", b, 0))
	ctx := ctxT(t)
	src := writeRandom(t, t.TempDir(), "tiny.gguf", 100<<20+12345, 1)
	want := sumFile(t, src)

	res, err := m.Add(ctx, AddOptions{Model: "tiny", Version: "v1", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(res.Stored, ","); got != "s3-a,s3-b" {
		t.Fatalf("stored on %s, want s3-a,s3-b", got)
	}
	man := res.Manifest
	if man.Format != "gguf" || len(man.Files) != 1 || man.Files[0].SHA256 != want || man.Files[0].Size != 100<<20+12345 {
		t.Fatalf("manifest %+v", man)
	}
	data, _ := os.ReadFile(src)
	if b3 := blake3.Sum256(data); man.Files[0].BLAKE3 != hex.EncodeToString(b3[:]) {
		t.Fatalf("manifest blake3 %q, want %x", man.Files[0].BLAKE3, b3)
	}
	if st := res.Stats["s3-a"]; st.PartsSent != 7 || st.PartsReused != 0 {
		t.Fatalf("s3-a stats %+v, want 7 parts sent", st)
	}

	list, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Model != "tiny" || list[0].Version != "v1" || len(list[0].Stores) != 2 || !list[0].Current {
		t.Fatalf("list %+v", list)
	}
	checks, err := m.Verify(ctx, "tiny", "v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		if c.Status != "ok" {
			t.Fatalf("verify: %+v", c)
		}
	}
	if len(checks) != 2 {
		t.Fatalf("verify gave %d checks, want 2", len(checks))
	}

	f, err := m.Fetch(ctx, "tiny", "")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	got, err := os.ReadFile(f.Path("tiny.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(src)
	if !bytes.Equal(got, orig) {
		t.Fatal("fetched bytes differ from the source")
	}

	// Adding the same bytes again stores nothing new.
	res, err = m.Add(ctx, AddOptions{Model: "tiny", Version: "v1", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Stats["s3-a"]; st.PartsSent != 0 {
		t.Fatalf("second add sent %+v", st)
	}
}

func TestUploadResumesAfterStoreCrash(t *testing.T) {
	srv := s3test.Start(t)
	store := s3Store(t, "s3-a", srv, 5<<20)
	m := newMirror(t, store)
	ctx := ctxT(t)
	const size = 100 << 20 // 20 parts of 5 MiB
	src := writeRandom(t, t.TempDir(), "w.safetensors", size, 2)

	// Kill the store once 40% has gone up.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for ctx.Err() == nil {
			for _, p := range m.Transfers() {
				if p.Kind == "add" && p.Bytes >= size*4/10 {
					srv.Kill()
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := m.Add(ctx, AddOptions{Model: "big", Version: "v1", Source: src})
	<-killed
	if err == nil {
		t.Fatal("add succeeded although the store was killed")
	}
	if !strings.Contains(err.Error(), "store s3-a is unreachable") {
		t.Errorf("add with the store killed: %v, want it to name the unreachable store", err)
	}

	srv.Restart()
	res, err := m.Add(ctx, AddOptions{Model: "big", Version: "v1", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Stats["s3-a"]
	t.Logf("after restart: %d parts reused, %d sent", st.PartsReused, st.PartsSent)
	if st.PartsReused < 6 || st.PartsReused+st.PartsSent != 20 {
		t.Fatalf("stats %+v: want at least 6 of 20 parts reused and only the rest sent", st)
	}
	checks, err := m.Verify(ctx, "big", "v1")
	if err != nil || len(checks) != 1 || checks[0].Status != "ok" {
		t.Fatalf("verify %+v %v", checks, err)
	}
}

func TestCorruptCopy(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	m := newMirror(t, s3Store(t, "s3-a", a, 5<<20), s3Store(t, "s3-b", b, 5<<20))
	ctx := ctxT(t)
	src := writeRandom(t, t.TempDir(), "m.gguf", 12<<20, 3)
	if _, err := m.Add(ctx, AddOptions{Model: "m", Version: "v1", Source: src}); err != nil {
		t.Fatal(err)
	}
	// Change bytes behind store A's back.
	onDisk := a.ObjectPath("weights", "llmgw/"+fileKey("m", "v1", "m.gguf"))
	f, err := os.OpenFile(onDisk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("corrupted!"), 7<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()

	checks, err := m.Verify(ctx, "m", "v1")
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, c := range checks {
		status[c.Store] = c.Status
	}
	if status["s3-a"] != "checksum_mismatch" || status["s3-b"] != "ok" {
		t.Fatalf("verify %+v", checks)
	}

	// A fresh node (no marks yet) tries A first, finds the mismatch, takes B's copy.
	m2 := newMirror(t, s3Store(t, "s3-a", a, 5<<20), s3Store(t, "s3-b", b, 5<<20))
	fe, err := m2.Fetch(ctx, "m", "v1")
	if err != nil {
		t.Fatal(err)
	}
	if got := sumFile(t, fe.Path("m.gguf")); got != sumFile(t, src) {
		t.Fatal("fetched copy does not match the source")
	}
	fe.Release()

	rep, err := m.Sync(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Repaired) != 1 || !strings.HasPrefix(rep.Repaired[0], "s3-a:") {
		t.Fatalf("sync report %+v, want A's file repaired", rep)
	}
	checks, _ = m.Verify(ctx, "m", "v1")
	for _, c := range checks {
		if c.Status != "ok" {
			t.Fatalf("after repair: %+v", c)
		}
	}

	// A deep sync on a mirror that knows nothing finds and repairs damage too.
	f, _ = os.OpenFile(b.ObjectPath("weights", "llmgw/"+fileKey("m", "v1", "m.gguf")), os.O_RDWR, 0)
	f.WriteAt([]byte("x"), 1)
	f.Close()
	m3 := newMirror(t, s3Store(t, "s3-a", a, 5<<20), s3Store(t, "s3-b", b, 5<<20))
	if rep, err := m3.Sync(ctx, true); err != nil || len(rep.Repaired) != 1 {
		t.Fatalf("deep sync %+v %v", rep, err)
	}
}

func TestFetchFromCacheWhenStoresAreDown(t *testing.T) {
	a := s3test.Start(t)
	m := newMirror(t, s3Store(t, "s3-a", a, 0))
	ctx := ctxT(t)
	src := writeRandom(t, t.TempDir(), "m.gguf", 1<<20, 7)
	if _, err := m.Add(ctx, AddOptions{Model: "m", Version: "v1", Source: src}); err != nil {
		t.Fatal(err)
	}
	f, err := m.Fetch(ctx, "m", "")
	if err != nil {
		t.Fatal(err)
	}
	f.Release()
	a.Kill()
	f, err = m.Fetch(ctx, "m", "")
	if err != nil || f.Manifest.Version != "v1" {
		t.Fatalf("fetch with the store down: %v", err)
	}
	f.Release()
	if _, err := m.Fetch(ctx, "other", ""); err == nil {
		t.Fatal("a model the node never fetched was found with the store down")
	}
}

func TestNeverServesMismatch(t *testing.T) {
	// Files are checked by BLAKE3 where the manifest has it, and by
	// SHA-256 in manifests written before it was recorded.
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "blake3", true: "sha256"}[legacy], func(t *testing.T) {
			a := s3test.Start(t)
			st := s3Store(t, "s3-a", a, 5<<20)
			m := newMirror(t, st)
			ctx := ctxT(t)
			src := writeRandom(t, t.TempDir(), "m.gguf", 1<<20, 4)
			res, err := m.Add(ctx, AddOptions{Model: "m", Version: "v1", Source: src})
			if err != nil {
				t.Fatal(err)
			}
			if legacy {
				man := res.Manifest
				man.Files[0].BLAKE3 = ""
				data, _ := json.Marshal(man)
				if err := st.PutSmall(ctx, manifestKey("m", "v1"), data); err != nil {
					t.Fatal(err)
				}
			}
			p := a.ObjectPath("weights", "llmgw/"+fileKey("m", "v1", "m.gguf"))
			data, _ := os.ReadFile(p)
			data[100] ^= 0xff
			os.WriteFile(p, data, 0o644)
			_, err = m.Fetch(ctx, "m", "v1")
			if !errors.Is(err, ErrChecksum) {
				t.Fatalf("fetch of the only, corrupt copy: got %v, want a checksum error", err)
			}
			if algo := map[bool]string{false: "with blake3", true: "with sha256"}[legacy]; !strings.Contains(err.Error(), algo) {
				t.Fatalf("error %q does not say it was checked %s", err, algo)
			}
			entries, _ := filepath.Glob(filepath.Join(m.cfg.CacheDir, "m", "v1", "*"))
			for _, e := range entries {
				if filepath.Base(e) == "m.gguf" {
					t.Fatalf("corrupt bytes were put in place: %v", entries)
				}
			}
			checks, err := m.Verify(ctx, "m", "v1")
			if err != nil || len(checks) != 1 || checks[0].Status != "checksum_mismatch" {
				t.Fatalf("verify %+v %v", checks, err)
			}
		})
	}
}

func TestStoreDownWhileAddingAndRemoving(t *testing.T) {
	a, b := s3test.Start(t), s3test.Start(t)
	m := newMirror(t, s3Store(t, "s3-a", a, 5<<20), s3Store(t, "s3-b", b, 5<<20))
	ctx := ctxT(t)
	src := writeRandom(t, t.TempDir(), "m.gguf", 6<<20, 5)

	a.Kill()
	res, err := m.Add(ctx, AddOptions{Model: "m", Version: "v1", Source: src})
	if err != nil {
		t.Fatal(err)
	}
	perr := res.PendingError()
	if perr == nil || !strings.Contains(perr.Error(), "store s3-a is unreachable") || !strings.Contains(perr.Error(), "stored on s3-b and will be copied when s3-a answers") {
		t.Fatalf("pending: %v", perr)
	}
	if _, err := m.Sync(ctx, false); err == nil {
		t.Fatal("sync with a store down reported no error")
	}
	st := m.Status()
	if st.Stores[0].Reachable || st.Stores[0].LagVersions != 1 {
		t.Fatalf("status %+v, want s3-a unreachable and one version behind", st)
	}
	a.Restart()
	rep, err := m.Sync(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Copied) != 1 || rep.Copied[0] != "m/v1 → s3-a" {
		t.Fatalf("sync %+v", rep)
	}

	// Removed on A while B is down: B removes it when it returns, nothing comes back.
	b.Kill()
	rr, err := m.Remove(ctx, "m", "v1", "tester")
	if err != nil {
		t.Fatal(err)
	}
	if len(rr.Removed) != 1 || rr.Pending["s3-b"] == "" {
		t.Fatalf("remove %+v", rr)
	}
	b.Restart()
	if _, err := m.Sync(ctx, false); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Sync(ctx, false); err != nil {
		t.Fatal(err)
	}
	list, _ := m.List(ctx)
	if len(list) != 0 {
		t.Fatalf("after sync: %+v, want nothing", list)
	}
	for _, srv := range []*s3test.Server{a, b} {
		if _, err := os.Stat(srv.ObjectPath("weights", "llmgw/"+fileKey("m", "v1", "m.gguf"))); err == nil {
			t.Fatalf("%s still holds the removed file", srv.Endpoint())
		}
	}
	if _, err := m.Add(ctx, AddOptions{Model: "m", Version: "v1", Source: src}); err == nil || !strings.Contains(err.Error(), "was removed") {
		t.Fatalf("re-adding a removed version: %v", err)
	}
}

func TestPickleRefused(t *testing.T) {
	m := newMirror(t, mustDir(t, "local"))
	dir := t.TempDir()
	writeRandom(t, dir, "pytorch_model.bin", 1000, 6)
	_, err := m.Add(ctxT(t), AddOptions{Model: "p", Source: dir})
	if err == nil || !strings.Contains(err.Error(), "pytorch_model.bin is a pickle format") {
		t.Fatalf("got %v", err)
	}
	if _, err := m.Add(ctxT(t), AddOptions{Model: "p", Source: dir, AllowPickle: true}); err != nil {
		t.Fatal(err)
	}
}

func mustDir(t testing.TB, name string) *DirStore {
	s, err := NewDirStore(name, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDirStoresAndCacheEviction(t *testing.T) {
	d1, d2 := mustDir(t, "d1"), mustDir(t, "d2")
	m, err := New(Config{Stores: []Store{d1, d2}, CacheDir: t.TempDir(), CacheSize: 3 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	src := t.TempDir()
	var versions []string
	for i := range 3 {
		p := writeRandom(t, src, "w"+string(rune('a'+i))+".gguf", 1<<20+100, uint64(10+i))
		res, err := m.Add(ctx, AddOptions{Model: "m", Source: p})
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, res.Manifest.Version)
		if len(res.Manifest.Version) != 12 {
			t.Fatalf("content version %q", res.Manifest.Version)
		}
	}
	f0, err := m.Fetch(ctx, "m", versions[0])
	if err != nil {
		t.Fatal(err)
	}
	f1, err := m.Fetch(ctx, "m", versions[1])
	if err != nil {
		t.Fatal(err)
	}
	f1.Release()
	// Both in the cache; the third needs room: v1 (released) goes, v0 (in use) stays.
	f2, err := m.Fetch(ctx, "m", versions[2])
	if err != nil {
		t.Fatal(err)
	}
	cached, _ := m.Cached()
	var have []string
	for _, c := range cached {
		have = append(have, c.Version)
	}
	if len(cached) != 2 || strings.Contains(strings.Join(have, ","), versions[1]) {
		t.Fatalf("cache holds %v; want %s and %s", have, versions[0], versions[2])
	}
	// With everything in use, a fourth version is refused with the reason.
	p := writeRandom(t, src, "wd.gguf", 2<<20, 20)
	res, err := m.Add(ctx, AddOptions{Model: "m", Source: p})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Fetch(ctx, "m", res.Manifest.Version); err == nil || !strings.Contains(err.Error(), "node cache is too small") {
		t.Fatalf("got %v", err)
	}
	f0.Release()
	f2.Release()
	if _, err := m.Fetch(ctx, "m", res.Manifest.Version); err != nil {
		t.Fatal(err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
