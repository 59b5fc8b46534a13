package llm

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/llmgw/llmgw/modules/llm/audit"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// The cluster's audit stream in Redis: the member is the audit log's
// Store.

const auditKey = "audit" // stream: one entry per change, every node's

// AddAudit appends e to the cluster's audit stream, trimmed to about max
// entries.
func (m *member) AddAudit(ctx context.Context, e llmapi.AuditEntry, max int) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return m.rdb.XAdd(ctx, &redis.XAddArgs{Stream: m.key(auditKey), MaxLen: int64(max), Approx: true,
		Values: []any{"e", b}}).Err()
}

// ReadAudit reads the cluster's audit stream, newest first, scanning at
// most max entries.
func (m *member) ReadAudit(ctx context.Context, q audit.Query, max int) (llmapi.AuditPage, error) {
	end, start := "+", "-"
	if !q.Until.IsZero() {
		end = strconv.FormatInt(q.Until.UnixMilli(), 10)
	}
	if q.Cursor != "" {
		end = "(" + q.Cursor
	}
	if !q.Since.IsZero() {
		start = strconv.FormatInt(q.Since.UnixMilli(), 10)
	}
	p := llmapi.AuditPage{Entries: []llmapi.AuditEntry{}, Source: "cluster"}
	for scanned := 0; scanned < max; {
		msgs, err := m.rdb.XRevRangeN(ctx, m.key(auditKey), end, start, 500).Result()
		if err != nil {
			return llmapi.AuditPage{}, err
		}
		for _, msg := range msgs {
			var e llmapi.AuditEntry
			s, _ := msg.Values["e"].(string)
			if json.Unmarshal([]byte(s), &e) != nil {
				continue
			}
			e.ID = msg.ID
			if !q.Match(e) {
				continue
			}
			if len(p.Entries) == q.Limit {
				p.Next = p.Entries[q.Limit-1].ID
				return p, nil
			}
			p.Entries = append(p.Entries, e)
		}
		scanned += len(msgs)
		if len(msgs) < 500 {
			break
		}
		end = "(" + msgs[len(msgs)-1].ID
	}
	return p, nil
}

// Interface guards
var _ audit.Store = (*member)(nil)
