package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// startTestRedis runs a real redis-server on a free loopback port for the
// test and returns a client of it.
func startTestRedis(t *testing.T) *redis.Client {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not installed; .ci/install installs it (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprint("127.0.0.1:", port)})
	t.Cleanup(func() { rdb.Close() })
	for deadline := time.Now().Add(10 * time.Second); rdb.Ping(context.Background()).Err() != nil; {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rdb
}

func TestSharedStorage(t *testing.T) {
	rdb := startTestRedis(t)
	ctx := context.Background()
	// Two nodes of one cluster and a node of another, on one Redis.
	a := &redisStorage{m: &Member{rdb: rdb, prefix: "llmgw:c1:"}, locks: map[string]string{}}
	b := &redisStorage{m: &Member{rdb: rdb, prefix: "llmgw:c1:"}, locks: map[string]string{}}
	other := &redisStorage{m: &Member{rdb: rdb, prefix: "llmgw:c2:"}, locks: map[string]string{}}

	if _, err := a.Load(ctx, "llmgw/admin/sessions/x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load of a missing key: %v, want fs.ErrNotExist", err)
	}
	if err := a.Delete(ctx, "nothing/here"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("delete of a missing key: %v, want fs.ErrNotExist", err)
	}
	before := time.Now()
	for _, k := range []string{"llmgw/admin/sessions/s1", "llmgw/admin/sessions/s2", "llmgw/admin/seen/s1", "llmgw/admin/lang/p1", "top"} {
		if err := a.Store(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	// The other node reads what the first wrote; the other cluster does not.
	if v, err := b.Load(ctx, "llmgw/admin/sessions/s1"); err != nil || string(v) != "v:llmgw/admin/sessions/s1" {
		t.Fatalf("other node's load: %q %v", v, err)
	}
	if other.Exists(ctx, "llmgw/admin/sessions/s1") {
		t.Fatal("another cluster on the same Redis sees this cluster's keys")
	}
	if !b.Exists(ctx, "llmgw/admin") || !b.Exists(ctx, "llmgw/admin/seen/s1") || b.Exists(ctx, "llmgw/admin/seen/s2") || b.Exists(ctx, "llmgw/adm") {
		t.Fatal("Exists is wrong for a directory, a key or a missing key")
	}
	st, err := b.Stat(ctx, "llmgw/admin/sessions/s2")
	if err != nil || !st.IsTerminal || st.Size != int64(len("v:llmgw/admin/sessions/s2")) || st.Modified.Before(before.Add(-time.Second)) {
		t.Fatalf("stat: %+v %v", st, err)
	}
	if st, err := b.Stat(ctx, "llmgw/admin"); err != nil || st.IsTerminal {
		t.Fatalf("stat of a directory: %+v %v", st, err)
	}
	if _, err := b.Stat(ctx, "llmgw/none"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat of a missing key: %v", err)
	}

	list := func(dir string, rec bool) []string {
		t.Helper()
		l, err := b.List(ctx, dir, rec)
		if err != nil {
			t.Fatalf("list %q: %v", dir, err)
		}
		return l
	}
	if got, want := list("llmgw/admin/sessions", false), []string{"llmgw/admin/sessions/s1", "llmgw/admin/sessions/s2"}; !slices.Equal(got, want) {
		t.Fatalf("list: %q, want %q", got, want)
	}
	if got, want := list("llmgw/admin/", false), []string{"llmgw/admin/lang", "llmgw/admin/seen", "llmgw/admin/sessions"}; !slices.Equal(got, want) {
		t.Fatalf("list of directories: %q, want %q", got, want)
	}
	if got, want := list("llmgw", true), []string{"llmgw/admin", "llmgw/admin/lang", "llmgw/admin/lang/p1", "llmgw/admin/seen", "llmgw/admin/seen/s1",
		"llmgw/admin/sessions", "llmgw/admin/sessions/s1", "llmgw/admin/sessions/s2"}; !slices.Equal(got, want) {
		t.Fatalf("recursive list: %q, want %q", got, want)
	}
	if got := list("", false); !slices.Equal(got, []string{"llmgw", "top"}) {
		t.Fatalf("list of the root: %q", got)
	}
	if _, err := b.List(ctx, "llmgw/none", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("list of a missing directory: %v", err)
	}
	// A key with glob characters lists only itself.
	if err := a.Store(ctx, "odd/[x]*/k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := a.Store(ctx, "odd/ax/k", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if got := list("odd/[x]*", false); !slices.Equal(got, []string{"odd/[x]*/k"}) {
		t.Fatalf("list under a name with glob characters: %q", got)
	}

	// Deleting on one node is seen on the other; a directory goes whole.
	if err := b.Delete(ctx, "llmgw/admin/sessions/s1"); err != nil {
		t.Fatal(err)
	}
	if a.Exists(ctx, "llmgw/admin/sessions/s1") {
		t.Fatal("a key deleted on one node is still there on the other")
	}
	if err := a.Delete(ctx, "llmgw/admin"); err != nil {
		t.Fatal(err)
	}
	if a.Exists(ctx, "llmgw/admin/seen/s1") || !a.Exists(ctx, "top") {
		t.Fatal("deleting a directory left a key under it, or took another")
	}
}

func TestSharedStorageLock(t *testing.T) {
	rdb := startTestRedis(t)
	ctx := context.Background()
	m := &Member{rdb: rdb, prefix: "llmgw:c1:"}
	a := &redisStorage{m: m, locks: map[string]string{}}
	b := &redisStorage{m: m, locks: map[string]string{}}
	if err := a.Lock(ctx, "issue"); err != nil {
		t.Fatal(err)
	}
	// The other node waits for it.
	short, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	if err := b.Lock(short, "issue"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second lock while held: %v, want it to wait until its context ends", err)
	}
	if err := b.Unlock(ctx, "issue"); err == nil {
		t.Fatal("unlock by a node that does not hold the lock succeeded")
	}
	var wg sync.WaitGroup
	got := make(chan error, 1)
	wg.Go(func() { got <- b.Lock(ctx, "issue") })
	time.Sleep(50 * time.Millisecond)
	if err := a.Unlock(ctx, "issue"); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := <-got; err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := b.Unlock(ctx, "issue"); err != nil {
		t.Fatal(err)
	}
}
