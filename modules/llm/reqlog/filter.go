package reqlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

const (
	defaultLimit = 50
	maxLimit     = 1000
	// maxScan bounds the records one page reads; a page that reached it
	// ends early with a cursor to go on from.
	maxScan = 50000
)

// Filter is what GET /llm/requests asks for. Every field set must match.
type Filter struct {
	// Model matches the model asked or the model that served.
	Model string
	Key   string
	// Tenant matches the tenant and every tenant below it (acme matches
	// acme/research/alpha).
	Tenant string
	API    string
	Node   string
	// Status is a status (404), a class (4xx) or "error" (400 and up).
	Status string
	// Error is an error code (rate_limit_exceeded).
	Error string
	// Text is part of the request id, any case.
	Text string
	// Since and Until bound the time the answer ended.
	Since, Until time.Time
	// Before asks for the records older than its cursor, newest first;
	// After for the records newer than its cursor, oldest first.
	Before, After string
	Limit         int
}

// ParseFilter reads a filter from a query: model, key, tenant, api, node,
// status, error, q, since, until (RFC 3339 times, or durations back from
// now such as 1h), before, after, limit.
func ParseFilter(q url.Values, now time.Time) (Filter, error) {
	f := Filter{Model: q.Get("model"), Key: q.Get("key"), Tenant: strings.Trim(q.Get("tenant"), "/"), API: q.Get("api"),
		Node: q.Get("node"), Status: strings.ToLower(q.Get("status")), Error: q.Get("error"), Text: strings.ToLower(q.Get("q")),
		Before: q.Get("before"), After: q.Get("after"), Limit: defaultLimit}
	var err error
	if f.Since, err = parseTime("since", q.Get("since"), now); err != nil {
		return f, err
	}
	if f.Until, err = parseTime("until", q.Get("until"), now); err != nil {
		return f, err
	}
	if f.Before != "" && f.After != "" {
		return f, fmt.Errorf("give before= (older pages) or after= (newer records, to follow), not both")
	}
	if err := checkStatus(f.Status); err != nil {
		return f, err
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return f, fmt.Errorf("limit %q: use a number from 1 to %d", v, maxLimit)
		}
		f.Limit = n
	}
	return f, nil
}

func parseTime(name, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if n, err := strconv.Atoi(strings.TrimSuffix(v, "d")); err == nil && n > 0 && strings.HasSuffix(v, "d") {
		return now.AddDate(0, 0, -n), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return t, fmt.Errorf("%s %q: use an RFC 3339 time (2026-12-05T10:00:00Z) or a duration back from now (90m, 24h, 7d)", name, v)
	}
	return t, nil
}

func checkStatus(s string) error {
	switch s {
	case "", "error", "1xx", "2xx", "3xx", "4xx", "5xx":
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 100 && n <= 599 {
		return nil
	}
	return fmt.Errorf("status %q: use a status (404), a class (4xx, 5xx) or error (400 and up)", s)
}

// match says whether rec is one the filter asks for.
func (f *Filter) match(rec *llmapi.RequestRecord) bool {
	switch {
	case f.Model != "" && rec.Model != f.Model && rec.Served != f.Model,
		f.Key != "" && rec.KeyID != f.Key,
		f.Tenant != "" && rec.Tenant != f.Tenant && !strings.HasPrefix(rec.Tenant, f.Tenant+"/"),
		f.API != "" && rec.API != f.API,
		f.Node != "" && rec.Node != f.Node,
		f.Error != "" && rec.Error != f.Error,
		f.Text != "" && !strings.Contains(strings.ToLower(rec.ID), f.Text),
		!f.Since.IsZero() && rec.End.Before(f.Since),
		!f.Until.IsZero() && rec.End.After(f.Until):
		return false
	}
	return f.matchStatus(rec)
}

func (f *Filter) matchStatus(rec *llmapi.RequestRecord) bool {
	switch s := f.Status; {
	case s == "":
		return true
	case s == "error":
		return rec.Status >= 400 || rec.Error != ""
	case strings.HasSuffix(s, "xx"):
		return rec.Status/100 == int(s[0]-'0')
	default:
		return strconv.Itoa(rec.Status) == s
	}
}

// Pager fills a page from the records a store reads in the page's order.
type Pager struct {
	f       Filter
	page    llmapi.RequestPage
	last    string // the cursor of the last record read
	key     []byte // the key's id as it appears in a record's JSON
	stopped bool
}

// NewPager starts a page of f.
func NewPager(f Filter) *Pager {
	p := &Pager{f: f, page: llmapi.RequestPage{Object: "list", Data: []llmapi.RequestRecord{}}}
	if f.Key != "" {
		p.key, _ = json.Marshal(f.Key)
	}
	return p
}

// Add reads one record (its JSON) at cursor and says whether to go on.
func (p *Pager) Add(cursor string, raw []byte) bool {
	if p.stopped {
		return false
	}
	p.page.Scanned++
	p.last = cursor
	if p.page.Scanned == 1 && p.f.After == "" {
		p.page.Newest = cursor
	}
	if p.key != nil && !bytes.Contains(raw, p.key) {
		return p.goOn()
	}
	var rec llmapi.RequestRecord
	if Decode(raw, &rec) == nil && p.f.match(&rec) {
		p.page.Data = append(p.page.Data, rec)
		if len(p.page.Data) >= p.f.Limit {
			p.stopped = true
			p.page.Next, p.page.HasMore = cursor, true
			return false
		}
	}
	return p.goOn()
}

func (p *Pager) goOn() bool {
	if p.page.Scanned >= maxScan {
		p.stopped = true
		p.page.Next, p.page.HasMore = p.last, true
		return false
	}
	return true
}

// Page is the page read. A page following (after=) that reached the end
// gets the last cursor read, to follow on from.
func (p *Pager) Page() llmapi.RequestPage {
	if !p.stopped && p.f.After != "" {
		p.page.Next = p.last
		if p.page.Next == "" {
			p.page.Next = p.f.After
		}
	}
	return p.page
}
