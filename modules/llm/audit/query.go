package audit

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// The kinds of error ParseQuery and Log.Read return besides a failure of
// storage; each error of a kind says in its own words what was wrong.
var (
	// ErrQuery is a query that cannot be read (a bad since, until or
	// limit): the client's mistake.
	ErrQuery = errors.New("bad audit query")
	// ErrCursor is a cursor that is not one of the cluster's stream:
	// the client's mistake.
	ErrCursor = errors.New("not a cursor of the cluster's audit stream")
	// ErrStoreDown is the cluster's store failing a read only it can
	// answer: the next page after a cursor of its stream.
	ErrStoreDown = errors.New("the cluster's audit stream does not answer")
)

// kindError is an error of one of the kinds above, in its own words.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

func errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// streamID is the form of a cursor of the cluster's stream.
var streamID = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

// Query is what GET /llm/audit asks for.
type Query struct {
	Since, Until time.Time // zero: unbounded
	Actor        string    // exactly
	Action       string    // a part of it, in any case
	Model        string    // the entry's model field, exactly
	Limit        int       // entries of a page
	Cursor       string    // the Next of the previous page
}

// Match reports whether e is one the query asks for; the cursor and
// the limit are the reader's.
func (q Query) Match(e llmapi.AuditEntry) bool {
	switch {
	case !q.Since.IsZero() && e.Time.Before(q.Since), !q.Until.IsZero() && e.Time.After(q.Until):
		return false
	case q.Actor != "" && e.Actor != q.Actor:
		return false
	case q.Action != "" && !strings.Contains(strings.ToLower(e.Action), strings.ToLower(q.Action)):
		return false
	case q.Model != "" && fmt.Sprint(e.Fields["model"]) != q.Model:
		return false
	}
	return true
}

// ParseQuery reads ?since=&until=&actor=&action=&model=&limit=&cursor=;
// since and until are RFC 3339 times or durations before now. Its errors
// are of the kind ErrQuery.
func ParseQuery(v url.Values, now time.Time) (Query, error) {
	q := Query{Actor: v.Get("actor"), Action: v.Get("action"), Model: v.Get("model"), Cursor: v.Get("cursor"), Limit: 100}
	for name, dst := range map[string]*time.Time{"since": &q.Since, "until": &q.Until} {
		s := v.Get(name)
		if s == "" {
			continue
		}
		if t, err := time.Parse(time.RFC3339, s); err == nil {
			*dst = t
			continue
		}
		d, err := caddy.ParseDuration(s)
		if err != nil || d < 0 {
			return q, errorf(ErrQuery, "%s=%s is neither an RFC 3339 time such as 2026-01-02T15:04:05Z nor a duration ago such as 1h", name, catalog.Bounded(s))
		}
		*dst = now.Add(-d)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, errorf(ErrQuery, "limit=%s: use a number from 1 to 1000", catalog.Bounded(s))
		}
		q.Limit = n
	}
	return q, nil
}
