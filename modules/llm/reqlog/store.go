package reqlog

import (
	"context"
	"errors"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// Store keeps the records: a bbolt file on a single node (Bolt), the
// cluster's Redis stream in a cluster (the cluster member makes it).
type Store interface {
	// Append writes entries in the order given: the order of their
	// answers' ends.
	Append(ctx context.Context, es []Entry, keep Retention) error
	// Page reads a page of the records f asks for, newest first, or
	// oldest first from f.After.
	Page(ctx context.Context, f Filter) (llmapi.RequestPage, error)
	// Get reads one record by request id, with its bodies when kept.
	Get(ctx context.Context, id string) (llmapi.RequestDetail, error)
	Close() error
}

// ErrNotFound is Get's error for a request the log does not hold.
var ErrNotFound = errors.New("no such request in the log")

// ErrCursor is Page's error for a cursor the store did not give.
var ErrCursor = errors.New("the cursor is not one this log gave: use a page's next")

// Retention bounds the log.
type Retention struct {
	// MaxAge drops records older than it; MaxRecords the oldest records
	// beyond it; BodyMaxAge drops kept bodies older than it.
	MaxAge     time.Duration
	MaxRecords int
	BodyMaxAge time.Duration
}

// Detail joins a record and its bodies.
func Detail(rec llmapi.RequestRecord, b *Bodies) llmapi.RequestDetail {
	d := llmapi.RequestDetail{RequestRecord: rec}
	if b != nil {
		d.RequestBody, d.ResponseBody, d.BodiesTruncated = b.Request, b.Response, b.Truncated
	} else {
		d.Bodies = false // expired since
	}
	return d
}
