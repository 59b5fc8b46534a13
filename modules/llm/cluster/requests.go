package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/llm/reqlog"
)

// The request log of a cluster is one Redis stream every node appends to
// (requests), with an index from request id to stream id and the kept
// bodies in keys that expire (requests:id:<id>, requests:body:<id>).

// RequestLog is the cluster's request log store.
func (m *Member) RequestLog() reqlog.Store { return requestStore{m} }

type requestStore struct{ m *Member }

// readBatch is how many records one read of the stream takes.
const readBatch = 512

// appendOne adds one record to the stream unless its request id is
// known (so a batch sent again after a timeout that Redis did carry out
// adds nothing twice), with the index from its id and its bodies.
// KEYS: stream, id key, body key; ARGV: record, max records (0: no
// bound), the index's TTL in ms, bodies ("" for none), their TTL in ms.
var appendOne = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local sid
if tonumber(ARGV[2]) > 0 then
	sid = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'r', ARGV[1])
else
	sid = redis.call('XADD', KEYS[1], '*', 'r', ARGV[1])
end
redis.call('SET', KEYS[2], sid, 'PX', ARGV[3])
if ARGV[4] ~= '' then redis.call('SET', KEYS[3], ARGV[4], 'PX', ARGV[5]) end
return 1`)

// Append adds es to the stream, bounded by count (approximately, as
// Redis trims whole nodes) and by age.
func (s requestStore) Append(ctx context.Context, es []reqlog.Entry, keep reqlog.Retention) error {
	stream := s.m.key("requests")
	ttl := keep.MaxAge
	if ttl <= 0 {
		ttl = reqlog.DefaultMaxAge
	}
	p := s.m.rdb.Pipeline()
	for i := range es {
		v, err := reqlog.Encode(&es[i].Rec)
		if err != nil {
			return err
		}
		var bodies []byte
		if es[i].Bodies != nil && keep.BodyMaxAge > 0 {
			bodies, _ = json.Marshal(es[i].Bodies)
		}
		id := es[i].Rec.ID
		appendOne.Eval(ctx, p, []string{stream, s.m.key("requests:id:" + id), s.m.key("requests:body:" + id)},
			v, keep.MaxRecords, ttl.Milliseconds(), bodies, keep.BodyMaxAge.Milliseconds())
	}
	if keep.MaxAge > 0 {
		p.XTrimMinIDApprox(ctx, stream, strconv.FormatInt(time.Now().Add(-keep.MaxAge).UnixMilli(), 10), 0)
	}
	_, err := p.Exec(ctx)
	return err
}

// Page reads the stream newest first from f.Before, or oldest first
// after f.After, in batches, until the page is full or the stream ends.
func (s requestStore) Page(ctx context.Context, f reqlog.Filter) (llmapi.RequestPage, error) {
	p := reqlog.NewPager(f)
	stream := s.m.key("requests")
	for from := firstBound(f.Before+f.After, f.After != ""); ; {
		if err := checkCursor(from); err != nil {
			return p.Page(), err
		}
		var msgs []redis.XMessage
		var err error
		if f.After != "" {
			msgs, err = s.m.rdb.XRangeN(ctx, stream, from, "+", readBatch).Result()
		} else {
			msgs, err = s.m.rdb.XRevRangeN(ctx, stream, from, "-", readBatch).Result()
		}
		if err != nil {
			return p.Page(), err
		}
		for _, msg := range msgs {
			raw, _ := msg.Values["r"].(string)
			if !p.Add(msg.ID, []byte(raw)) {
				return p.Page(), nil
			}
		}
		if len(msgs) < readBatch {
			return p.Page(), nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// firstBound is the first bound of a read: exclusive of the cursor, or
// the stream's end.
func firstBound(cursor string, forward bool) string {
	switch {
	case cursor != "":
		return "(" + cursor
	case forward:
		return "-"
	}
	return "+"
}

// checkCursor refuses a cursor that is not a stream id.
func checkCursor(bound string) error {
	c := strings.TrimPrefix(bound, "(")
	if c == "+" || c == "-" {
		return nil
	}
	ms, seq, ok := strings.Cut(c, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil || !ok {
		return fmt.Errorf("%w: %q", reqlog.ErrCursor, c)
	}
	if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
		return fmt.Errorf("%w: %q", reqlog.ErrCursor, c)
	}
	return nil
}

// Get reads one request by id, with its bodies when they are kept.
func (s requestStore) Get(ctx context.Context, id string) (llmapi.RequestDetail, error) {
	sid, err := s.m.rdb.Get(ctx, s.m.key("requests:id:"+id)).Result()
	if errors.Is(err, redis.Nil) {
		return llmapi.RequestDetail{}, reqlog.ErrNotFound
	}
	if err != nil {
		return llmapi.RequestDetail{}, err
	}
	msgs, err := s.m.rdb.XRange(ctx, s.m.key("requests"), sid, sid).Result()
	if err != nil {
		return llmapi.RequestDetail{}, err
	}
	if len(msgs) == 0 {
		return llmapi.RequestDetail{}, reqlog.ErrNotFound
	}
	var rec llmapi.RequestRecord
	raw, _ := msgs[0].Values["r"].(string)
	if err := reqlog.Decode([]byte(raw), &rec); err != nil {
		return llmapi.RequestDetail{}, err
	}
	var bodies *reqlog.Bodies
	if bv, err := s.m.rdb.Get(ctx, s.m.key("requests:body:"+id)).Bytes(); err == nil {
		bodies = new(reqlog.Bodies)
		_ = json.Unmarshal(bv, bodies)
	}
	return reqlog.Detail(rec, bodies), nil
}

// Close does nothing: the client is the member's.
func (requestStore) Close() error { return nil }
