package cluster

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/llmgw/llmgw/modules/openai/responsesapi"
	"github.com/redis/go-redis/v9"
)

// redisResponses keeps the Responses API's stored responses in the
// cluster's Redis, so that any node answers previous_response_id and
// GET /v1/responses/{id}: one key per response, under the key (scope)
// that made it, expiring with the response.
type redisResponses struct{ m *Member }

func (s redisResponses) key(scope, id string) string {
	return s.m.key("resp:" + strconv.Itoa(len(scope)) + ":" + scope + ":" + id)
}

func (s redisResponses) Put(ctx context.Context, scope, id string, v []byte, ttl time.Duration) error {
	return s.m.rdb.Set(ctx, s.key(scope, id), v, ttl).Err()
}

func (s redisResponses) Get(ctx context.Context, scope, id string) ([]byte, error) {
	b, err := s.m.rdb.Get(ctx, s.key(scope, id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, responsesapi.ErrNotStored
	}
	return b, err
}

func (s redisResponses) Delete(ctx context.Context, scope, id string) error {
	n, err := s.m.rdb.Del(ctx, s.key(scope, id)).Result()
	if err == nil && n == 0 {
		return responsesapi.ErrNotStored
	}
	return err
}
