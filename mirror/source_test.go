package mirror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// cuttingServer serves one file with Range support; the first request is
// cut after cutAt bytes, as a dropped connection would.
type cuttingServer struct {
	data   []byte
	cutAt  int
	mu     sync.Mutex
	ranges []string
	cut    bool
}

func (s *cuttingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ranges = append(s.ranges, r.Header.Get("Range"))
	first := !s.cut
	s.cut = true
	s.mu.Unlock()
	if first {
		w.Header().Set("Content-Length", fmt.Sprint(len(s.data)))
		w.WriteHeader(http.StatusOK)
		w.Write(s.data[:s.cutAt])
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	http.ServeContent(w, r, "f", time.Time{}, bytes.NewReader(s.data))
}

func TestHTTPSourceResumes(t *testing.T) {
	data, _ := os.ReadFile(writeRandom(t, t.TempDir(), "x", 3<<20+7, 30))
	cs := &cuttingServer{data: data, cutAt: 1<<20 + 3}
	srv := httptest.NewServer(cs)
	defer srv.Close()
	m := newMirror(t, mustDir(t, "local"))
	res, err := m.Add(ctxT(t), AddOptions{Model: "h", Version: "v1", Source: srv.URL + "/weights/model.gguf?token=secret"})
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Manifest.Files[0]; f.Path != "model.gguf" || f.SHA256 != sha(data) || f.Size != int64(len(data)) {
		t.Fatalf("manifest file %+v", f)
	}
	if len(cs.ranges) != 2 || cs.ranges[0] != "" || cs.ranges[1] != fmt.Sprintf("bytes=%d-", cs.cutAt) {
		t.Fatalf("requests' ranges %q; want the second to resume at %d", cs.ranges, cs.cutAt)
	}
}

func TestHTTPSourceErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	m := newMirror(t, mustDir(t, "local"))
	_, err := m.Add(ctxT(t), AddOptions{Model: "h", Source: srv.URL + "/nope.gguf"})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("got %v", err)
	}
	_, err = m.Add(ctxT(t), AddOptions{Model: "h", Source: "ftp://x/y.gguf"})
	if err == nil || !strings.Contains(err.Error(), "unknown scheme") {
		t.Fatalf("got %v", err)
	}
}

// standInRegistry implements the registry endpoints the client uses:
// revision → commit, the recursive tree with sizes and LFS sums, and
// resolve/<commit>/<path>. It is a stand-in: the real registry cannot be
// reached from the test machines.
type standInRegistry struct {
	mu      sync.Mutex
	commit  string
	files   map[string]map[string][]byte // commit → path → bytes
	lfs     map[string]bool
	lie     map[string]string // path → the sum to list instead of the real one
	gotAuth []string
}

func (r *standInRegistry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gotAuth = append(r.gotAuth, req.Header.Get("Authorization"))
	p := req.URL.Path
	switch {
	case strings.HasPrefix(p, "/api/models/org/repo/revision/"):
		rev := strings.TrimPrefix(p, "/api/models/org/repo/revision/")
		c := r.commit
		if _, ok := r.files[rev]; ok {
			c = rev
		} else if rev != "main" {
			http.NotFound(w, req)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "org/repo", "sha": c})
	case strings.HasPrefix(p, "/api/models/org/repo/tree/"):
		c := strings.TrimPrefix(p, "/api/models/org/repo/tree/")
		var out []map[string]any
		for path, b := range r.files[c] {
			e := map[string]any{"type": "file", "path": path, "size": len(b), "oid": "gitoid"}
			if r.lfs[path] {
				sum := sha(b)
				if l, ok := r.lie[path]; ok {
					sum = l
				}
				e["lfs"] = map[string]any{"oid": sum, "size": len(b), "pointerSize": 130}
			}
			out = append(out, e)
		}
		out = append(out, map[string]any{"type": "directory", "path": "sub", "oid": "x", "size": 0})
		json.NewEncoder(w).Encode(out)
	case strings.HasPrefix(p, "/org/repo/resolve/"):
		rest := strings.TrimPrefix(p, "/org/repo/resolve/")
		c, path, _ := strings.Cut(rest, "/")
		b, ok := r.files[c][path]
		if !ok {
			http.NotFound(w, req)
			return
		}
		http.ServeContent(w, req, path, time.Time{}, bytes.NewReader(b))
	default:
		http.NotFound(w, req)
	}
}

func TestRegistrySourceUpdatesAndRollback(t *testing.T) {
	reg := &standInRegistry{
		commit: "1111111111111111111111111111111111111111",
		files: map[string]map[string][]byte{
			"1111111111111111111111111111111111111111": {"model.safetensors": []byte(strings.Repeat("a", 5000)), "config.json": []byte(`{"v":1}`), ".gitattributes": []byte("x")},
		},
		lfs: map[string]bool{"model.safetensors": true},
	}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	m, err := New(Config{Stores: []Store{mustDir(t, "d1"), mustDir(t, "d2")}, CacheDir: t.TempDir(), Registry: srv.URL, RegistryToken: "hf-token"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	res, err := m.Add(ctx, AddOptions{Model: "r", Source: "hf://org/repo", Track: true})
	if err != nil {
		t.Fatal(err)
	}
	man := res.Manifest
	if man.Version != "111111111111" || man.Origin.Commit != reg.commit || man.Origin.Repository != "org/repo" || man.Origin.Revision != "main" || len(man.Files) != 2 || man.Format != "safetensors" {
		t.Fatalf("manifest %+v", man)
	}
	for _, a := range reg.gotAuth {
		if a != "Bearer hf-token" {
			t.Fatalf("registry saw Authorization %q", a)
		}
	}

	ups, err := m.Updates(ctx)
	if err != nil || len(ups) != 1 || ups[0].Moved {
		t.Fatalf("updates %+v %v", ups, err)
	}
	// The repository moves on; a file in LFS changes.
	reg.mu.Lock()
	reg.commit = "2222222222222222222222222222222222222222"
	reg.files[reg.commit] = map[string][]byte{"model.safetensors": []byte(strings.Repeat("b", 6000)), "config.json": []byte(`{"v":2}`)}
	reg.mu.Unlock()
	ups, err = m.Updates(ctx)
	if err != nil || len(ups) != 1 || !ups[0].Moved || ups[0].Latest != reg.commit {
		t.Fatalf("updates %+v %v", ups, err)
	}
	if _, err := m.UpdateModel(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := m.Current(ctx, "r"); cur != "222222222222" {
		t.Fatalf("current %s after update", cur)
	}
	list, _ := m.List(ctx)
	if len(list) != 2 {
		t.Fatalf("list %+v: both versions should be kept", list)
	}
	if _, err := m.Rollback(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := m.Current(ctx, "r"); cur != "111111111111" {
		t.Fatalf("current %s after rollback", cur)
	}
	// One model's check; a track written back as it was.
	if u, err := m.CheckUpdate(ctx, "r"); err != nil || !u.Moved || u.Current != "111111111111" || u.Latest != reg.commit {
		t.Fatalf("check of r after the rollback: %+v %v", u, err)
	}
	before, _ := m.Track(ctx, "r")
	if _, err := m.MakeCurrent(ctx, "r", "222222222222"); err != nil {
		t.Fatal(err)
	}
	if err := m.RestoreTrack(ctx, before); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.Track(ctx, "r"); after.Current != before.Current || after.Previous != before.Previous {
		t.Fatalf("track after restore %+v, want %+v", after, before)
	}
	if _, err := m.CheckUpdate(ctx, "nothing"); !errors.Is(err, ErrNotTracked) {
		t.Fatalf("check of an untracked model: got %v, want ErrNotTracked", err)
	}

	// A pinned revision and a path inside the repository.
	res, err = m.Add(ctx, AddOptions{Model: "r2", Source: "hf://org/repo@2222222222222222222222222222222222222222/config.json"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Manifest.Files) != 1 || res.Manifest.Files[0].Path != "config.json" {
		t.Fatalf("files %+v", res.Manifest.Files)
	}

	// The registry lies about a sum: the download is refused.
	reg.mu.Lock()
	reg.commit = "3333333333333333333333333333333333333333"
	reg.files[reg.commit] = map[string][]byte{"model.safetensors": []byte("c")}
	reg.lie = map[string]string{"model.safetensors": sha([]byte("d"))}
	reg.mu.Unlock()
	_, err = m.Add(ctx, AddOptions{Model: "r3", Source: "hf://org/repo"})
	if !errors.Is(err, ErrChecksum) {
		t.Fatalf("a download that does not match the registry's sum: got %v, want a checksum error", err)
	}
}

func TestRegistryErrors(t *testing.T) {
	m := newMirror(t, mustDir(t, "local"))
	if _, err := m.Add(ctxT(t), AddOptions{Model: "x", Source: "hf://org/repo"}); err == nil || !strings.Contains(err.Error(), "HF_ENDPOINT") {
		t.Fatalf("got %v", err)
	}
	for _, bad := range []string{"hf://org", "hf://org/", "hf://org/repo@", "hf://org/repo/../x"} {
		if _, err := ParseRegistryRef(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
	ref, err := ParseRegistryRef("hf://org/repo@v2/sub/dir")
	if err != nil || ref.Repository != "org/repo" || ref.Revision != "v2" || ref.Path != "sub/dir" {
		t.Fatalf("%+v %v", ref, err)
	}
}
