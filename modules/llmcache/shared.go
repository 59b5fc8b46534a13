package llmcache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"runtime/debug"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Sharing through Redis: every kept entry is written to Redis with its TTL
// and announced on a channel; the other instances index it locally.
// Lookups never leave the process. A starting instance warms from Redis.
const (
	sharedPrefix  = "llmgw:c:e:"
	sharedChannel = "llmgw:c:events"
)

type shared struct {
	client *redis.Client
	store  *entries
	origin string
	logger *zap.Logger
	cancel context.CancelFunc
	done   chan struct{}
}

// wireEntry is an entry as stored in Redis and announced.
type wireEntry struct {
	Origin   string    `json:"origin,omitempty"`
	Purge    *purgeMsg `json:"purge,omitempty"`
	Key      string    `json:"key,omitempty"`
	Bucket   string    `json:"bucket,omitempty"`
	Question string    `json:"question,omitempty"`
	Vec      []int8    `json:"vec,omitempty"`
	Ans      *answer   `json:"answer,omitempty"`
	Expires  time.Time `json:"expires,omitzero"`
	Scope    string    `json:"scope,omitempty"`
	Model    string    `json:"model,omitempty"`
}

type purgeMsg struct{ Model, Scope string }

func toWire(e *entry) wireEntry {
	return wireEntry{Key: e.key, Bucket: e.bucket, Question: e.question, Vec: e.vec, Ans: e.answer(),
		Expires: e.expires, Scope: e.scope, Model: e.model}
}

func (w wireEntry) entry() *entry {
	e := &entry{key: w.Key, bucket: w.Bucket, question: w.Question, vec: w.Vec, ans: w.Ans,
		expires: w.Expires, scope: w.Scope, model: w.Model}
	if w.Question != "" {
		e.an = analyze(w.Question)
	}
	return e
}

func newShared(url string, store *entries, logger *zap.Logger) (*shared, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opts.Protocol = 2
	var b [6]byte
	_, _ = rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	s := &shared{client: redis.NewClient(opts), store: store, origin: hex.EncodeToString(b[:]),
		logger: logger, cancel: cancel, done: make(chan struct{})}
	sub := s.client.Subscribe(ctx, sharedChannel)
	go s.listen(ctx, sub)
	go s.warm(ctx)
	return s, nil
}

func (s *shared) close() {
	s.cancel()
	<-s.done
	_ = s.client.Close()
}

// publish writes an entry and announces it, off the request path.
func (s *shared) publish(e *entry) {
	w := toWire(e)
	w.Origin = s.origin
	b, err := json.Marshal(w)
	if err != nil {
		return
	}
	ttl := time.Until(e.expires)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		pipe := s.client.Pipeline()
		pipe.Set(ctx, sharedPrefix+e.key, b, ttl)
		pipe.Publish(ctx, sharedChannel, b)
		if _, err := pipe.Exec(ctx); err != nil {
			s.logger.Warn("sharing a cache entry", zap.Error(err))
		}
	}()
}

// purge announces a purge and removes matching entries from Redis.
func (s *shared) purge(model, scope string) {
	b, _ := json.Marshal(wireEntry{Origin: s.origin, Purge: &purgeMsg{Model: model, Scope: scope}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s.client.Publish(ctx, sharedChannel, b)
	iter := s.client.Scan(ctx, 0, sharedPrefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		if model != "" || scope != "" {
			raw, err := s.client.Get(ctx, k).Bytes()
			var w wireEntry
			if err != nil || json.Unmarshal(raw, &w) != nil ||
				(model != "" && w.Model != model) || (scope != "" && w.Scope != scope) {
				continue
			}
		}
		s.client.Del(ctx, k)
	}
}

func (s *shared) listen(ctx context.Context, sub *redis.PubSub) {
	defer close(s.done)
	defer sub.Close()
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("cache subscriber panicked", zap.Any("panic", r), zap.ByteString("stack", debug.Stack()))
		}
	}()
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return
		case m, ok := <-ch:
			if !ok {
				return
			}
			var w wireEntry
			if json.Unmarshal([]byte(m.Payload), &w) != nil || w.Origin == s.origin {
				continue
			}
			if w.Purge != nil {
				s.store.purge(w.Purge.Model, w.Purge.Scope)
				continue
			}
			if w.Ans != nil {
				s.store.putLocal(w.entry())
			}
		}
	}
}

// warm loads the entries other instances kept before this one started.
func (s *shared) warm(ctx context.Context) {
	n := 0
	iter := s.client.Scan(ctx, 0, sharedPrefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		raw, err := s.client.Get(ctx, iter.Val()).Bytes()
		var w wireEntry
		if err != nil || json.Unmarshal(raw, &w) != nil || w.Ans == nil {
			continue
		}
		s.store.putLocal(w.entry())
		n++
	}
	if err := iter.Err(); err != nil && ctx.Err() == nil {
		s.logger.Warn("warming the cache from redis", zap.Error(err))
		return
	}
	s.logger.Info("cache warmed from redis", zap.Int("entries", n))
}
