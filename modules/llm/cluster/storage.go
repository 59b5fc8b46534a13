package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/redis/go-redis/v9"
)

// redisStorage is certmagic.Storage on the cluster's Redis: a key is a
// hash (v: the value, t: when it was written, in Unix nanoseconds) named
// <prefix>kv:<key>; a directory is the set of keys that start with it
// and a slash.
type redisStorage struct {
	m *Member

	mu    sync.Mutex
	locks map[string]string // lock name → this storage's token
}

func (s *redisStorage) key(k string) string { return s.m.key("kv:" + strings.Trim(k, "/")) }

// storeErr says which store failed and that nothing was done.
func (s *redisStorage) storeErr(op, key string, err error) error {
	return fmt.Errorf("cluster store: %s %s: %w", op, key, err)
}

func (s *redisStorage) Store(ctx context.Context, key string, value []byte) error {
	err := s.m.rdb.HSet(ctx, s.key(key), "v", value, "t", strconv.FormatInt(time.Now().UnixNano(), 10)).Err()
	if err != nil {
		return s.storeErr("store", key, err)
	}
	return nil
}

func (s *redisStorage) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := s.m.rdb.HGet(ctx, s.key(key), "v").Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, fs.ErrNotExist
	case err != nil:
		return nil, s.storeErr("load", key, err)
	}
	return b, nil
}

// Delete removes a key, or a directory with every key under it.
func (s *redisStorage) Delete(ctx context.Context, key string) error {
	n, err := s.m.rdb.Del(ctx, s.key(key)).Result()
	if err != nil {
		return s.storeErr("delete", key, err)
	}
	under, err := s.scan(ctx, key)
	if err != nil {
		return err
	}
	for c := range slices.Chunk(under, 500) {
		m, err := s.m.rdb.Del(ctx, c...).Result()
		if err != nil {
			return s.storeErr("delete", key, err)
		}
		n += m
	}
	if n == 0 {
		return fs.ErrNotExist
	}
	return nil
}

func (s *redisStorage) Exists(ctx context.Context, key string) bool {
	n, err := s.m.rdb.Exists(ctx, s.key(key)).Result()
	if err == nil && n > 0 {
		return true
	}
	under, err := s.scanN(ctx, key, 1)
	return err == nil && len(under) > 0
}

// List lists the keys and directories in dir (everything under it when
// recursive), as paths that start with dir, as Caddy's file storage does.
func (s *redisStorage) List(ctx context.Context, dir string, recursive bool) ([]string, error) {
	dir = strings.Trim(dir, "/")
	under, err := s.scan(ctx, dir)
	if err != nil {
		return nil, err
	}
	if len(under) == 0 {
		return nil, fs.ErrNotExist
	}
	strip := len(s.key(dir)) + 1
	if dir == "" {
		strip = len(s.m.key("kv:"))
	}
	seen := map[string]bool{}
	var out []string
	for _, k := range under {
		rel := k[strip:]
		if !recursive {
			rel, _, _ = strings.Cut(rel, "/")
		} else {
			// Directories too, as a walk of the file storage gives them.
			for i := strings.IndexByte(rel, '/'); i >= 0; i = next(rel, i) {
				if d := path.Join(dir, rel[:i]); !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
		if p := path.Join(dir, rel); !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// next is the index of the slash after the one at i in s, or -1.
func next(s string, i int) int {
	j := strings.IndexByte(s[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

func (s *redisStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	vals, err := s.m.rdb.HMGet(ctx, s.key(key), "v", "t").Result()
	if err != nil {
		return certmagic.KeyInfo{}, s.storeErr("stat", key, err)
	}
	if v, ok := vals[0].(string); ok {
		t, _ := vals[1].(string)
		ns, _ := strconv.ParseInt(t, 10, 64)
		return certmagic.KeyInfo{Key: key, Modified: time.Unix(0, ns), Size: int64(len(v)), IsTerminal: true}, nil
	}
	if s.Exists(ctx, key) {
		return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
	}
	return certmagic.KeyInfo{}, fs.ErrNotExist
}

// scan lists the Redis keys of everything under dir.
func (s *redisStorage) scan(ctx context.Context, dir string) ([]string, error) {
	return s.scanN(ctx, dir, 0)
}

// scanN is scan stopping once it found limit keys (0: all).
func (s *redisStorage) scanN(ctx context.Context, dir string, limit int) ([]string, error) {
	match := globEscape(s.key(dir)) + "/*"
	if strings.Trim(dir, "/") == "" {
		match = globEscape(s.m.key("kv:")) + "*"
	}
	var out []string
	iter := s.m.rdb.Scan(ctx, 0, match, 1000).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
		if limit > 0 && len(out) >= limit {
			break
		}
	}
	if err := iter.Err(); err != nil {
		return nil, s.storeErr("list", dir, err)
	}
	return out, nil
}

// globEscape quotes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lockTTL bounds how long a lock outlives a node that died holding it.
const lockTTL = time.Minute

// Lock takes the named lock, waiting for another holder (on any node) to
// release it or for its time to run out.
func (s *redisStorage) Lock(ctx context.Context, name string) error {
	token := rand.Text()
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		ok, err := s.m.rdb.SetNX(ctx, s.m.key("kvlock:"+name), token, lockTTL).Result()
		if err != nil {
			return s.storeErr("lock", name, err)
		}
		if ok {
			s.mu.Lock()
			s.locks[name] = token
			s.mu.Unlock()
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (s *redisStorage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	token, ok := s.locks[name]
	delete(s.locks, name)
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("cluster store: unlock %s: not locked by this node", name)
	}
	if err := s.m.rdb.Eval(ctx, unlockScript, []string{s.m.key("kvlock:" + name)}, token).Err(); err != nil {
		return s.storeErr("unlock", name, err)
	}
	return nil
}
