package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/certmagic"
	"github.com/llmgw/llmgw/modules/internal/caddyfileutil"
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// AuditConfig bounds the audit log: every change made through the admin
// API (who, what, when, on which node), kept in Caddy storage under
// llm/audit/ in daily segments and, in a cluster, in a Redis stream that
// every node writes to. GET /llm/audit and llmgw ctl audit read it back.
type AuditConfig struct {
	// Keep is how long entries are kept in Caddy storage. Default: 30d.
	Keep caddy.Duration `json:"keep,omitempty"`
	// MaxEntries bounds the entries kept in Caddy storage and in the
	// cluster's stream (approximately there). Default: 100000.
	MaxEntries int `json:"max_entries,omitempty"`
}

func (c *AuditConfig) keep() time.Duration {
	if c == nil || c.Keep <= 0 {
		return 30 * 24 * time.Hour
	}
	return time.Duration(c.Keep)
}

func (c *AuditConfig) maxEntries() int {
	if c == nil || c.MaxEntries <= 0 {
		return 100000
	}
	return c.MaxEntries
}

// parse reads
//
//	audit {
//		keep        <duration>  # default 30d
//		max_entries <n>         # default 100000
//	}
func (c *AuditConfig) parse(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	return caddyfileutil.EachSubdirective(d, func(dir string) error {
		switch dir {
		case "keep":
			return caddyfileutil.DurationArg(d, &c.Keep)
		case "max_entries":
			return caddyfileutil.IntArg(d, &c.MaxEntries, 1)
		}
		return d.Errf("unrecognized audit subdirective %q; use keep or max_entries", dir)
	})
}

// audit logs an administrative change with who made it, and records it
// in the audit log. Its string values come from requests (the actor
// header, ids, names), so each is cut to a bounded length.
func (a *App) audit(r *http.Request, msg string, fields ...zap.Field) {
	actor := catalog.BoundedLog(r.Header.Get("X-Llmgw-Actor"))
	if actor == "" {
		actor = "unknown"
	}
	for i, f := range fields {
		if f.Type == zapcore.StringType && len(f.String) > catalog.MaxLogValue {
			fields[i].String = catalog.BoundedLog(f.String)
		}
	}
	at := now().UTC()
	a.logger.Named("audit").Info(msg, append(fields, zap.String("actor", actor), zap.Time("at", at))...)
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		if f.Type == zapcore.ByteStringType && json.Valid(f.Interface.([]byte)) {
			enc.Fields[f.Key] = json.RawMessage(f.Interface.([]byte))
			continue
		}
		f.AddTo(enc)
	}
	e := llmapi.AuditEntry{Time: at, Actor: actor, Action: msg, Node: a.nodeName(), Fields: enc.Fields}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	if err := auditLog.append(ctx, a.local, a.Audit, e); err != nil {
		a.logger.Error("recording an audit entry in storage", zap.String("action", msg), zap.Error(err))
	}
	if a.cluster != nil {
		if err := a.cluster.auditAdd(ctx, e, a.Audit.maxEntries()); err != nil {
			a.logger.Warn("recording an audit entry in the cluster store; it is in this node's storage", zap.String("action", msg), zap.Error(err))
		}
	}
}

// auditPrefix is where the audit log lives in Caddy storage:
// llm/audit/<day>/<node>-<start>.jsonl, one JSON entry a line.
const (
	auditPrefix  = "llm/audit"
	segmentLines = 1000
)

// auditLog is the process's audit segment being written; it outlives
// configs, so a reload continues it.
var auditLog auditSegments

type auditSegments struct {
	mu    sync.Mutex
	key   string // the segment being written
	day   string
	lines [][]byte
	seq   uint64
}

func (s *auditSegments) append(ctx context.Context, st certmagic.Storage, cfg *AuditConfig, e llmapi.AuditEntry) error {
	if st == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	e.ID = fmt.Sprintf("%019d.%s.%d", e.Time.UnixNano(), e.Node, s.seq)
	day := e.Time.Format(time.DateOnly)
	segLines := cfg.segmentLines()
	fresh := s.key == "" || s.day != day || len(s.lines) >= segLines
	if fresh {
		s.day, s.lines = day, nil
		s.key = path.Join(auditPrefix, day, fmt.Sprintf("%s-%019d.jsonl", safeSegment(e.Node), e.Time.UnixNano()))
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	s.lines = append(s.lines, b)
	if err := st.Store(ctx, s.key, bytes.Join(s.lines, []byte("\n"))); err != nil {
		return err
	}
	if fresh {
		return pruneAudit(ctx, st, cfg, s.key)
	}
	return nil
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9._-]`)

func safeSegment(s string) string {
	if s == "" {
		return "node"
	}
	return unsafeChars.ReplaceAllString(s, "_")
}

// auditSegment is one segment file: its day and key.
type auditSegment struct{ day, key string }

func listSegments(ctx context.Context, st certmagic.Storage) ([]auditSegment, error) {
	keys, err := st.List(ctx, auditPrefix, true)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []auditSegment
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, auditPrefix+"/")
		day, file, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || !strings.HasSuffix(file, ".jsonl") {
			continue
		}
		out = append(out, auditSegment{day, k})
	}
	// Oldest first: by day, then by the segment's start.
	slices.SortFunc(out, func(x, y auditSegment) int {
		if c := strings.Compare(x.day, y.day); c != 0 {
			return c
		}
		return strings.Compare(segStart(x.key), segStart(y.key))
	})
	return out, nil
}

func segStart(key string) string {
	base := strings.TrimSuffix(path.Base(key), ".jsonl")
	return base[strings.LastIndexByte(base, '-')+1:]
}

// segmentLines is how many entries a segment holds: segmentLines, or a
// quarter of max_entries when that is less. A segment also ends with its
// day, so segments can be short; see pruneAudit for what that bounds.
func (c *AuditConfig) segmentLines() int {
	return max(1, min(segmentLines, c.maxEntries()/4))
}

// pruneAudit removes segments older than keep, then the oldest segments
// while the entries kept and a full current segment would be more than
// max; current (just started) is never removed. So the log holds at most
// max entries. A segment is removed only while the log is within a
// segment of max, so it keeps at least max less two segments (half of max
// when that is less) once it has had that many, even when days cut
// segments short.
func pruneAudit(ctx context.Context, st certmagic.Storage, cfg *AuditConfig, current string) error {
	segs, err := listSegments(ctx, st)
	if err != nil {
		return err
	}
	oldest := now().UTC().Add(-cfg.keep()).Format(time.DateOnly)
	counts := make([]int, len(segs))
	total := 0
	for i, sg := range segs {
		if sg.day >= oldest || sg.key == current {
			b, err := st.Load(ctx, sg.key)
			if err != nil {
				continue
			}
			counts[i] = bytes.Count(b, []byte("\n")) + 1
			total += counts[i]
		}
	}
	for i, sg := range segs {
		if sg.key == current {
			continue
		}
		if sg.day < oldest || total+cfg.segmentLines()-1 > cfg.maxEntries() {
			if err := st.Delete(ctx, sg.key); err != nil {
				return err
			}
			total -= counts[i]
		}
	}
	return nil
}

// auditQuery is what GET /llm/audit asks for.
type auditQuery struct {
	since, until time.Time
	actor        string
	action       string
	model        string
	limit        int
	cursor       string
}

func (q auditQuery) match(e llmapi.AuditEntry) bool {
	switch {
	case !q.since.IsZero() && e.Time.Before(q.since), !q.until.IsZero() && e.Time.After(q.until):
		return false
	case q.actor != "" && e.Actor != q.actor:
		return false
	case q.action != "" && !strings.Contains(strings.ToLower(e.Action), strings.ToLower(q.action)):
		return false
	case q.model != "" && fmt.Sprint(e.Fields["model"]) != q.model:
		return false
	}
	return true
}

// readStorage reads the audit log in Caddy storage, newest first.
func readStorage(ctx context.Context, st certmagic.Storage, q auditQuery) (llmapi.AuditPage, error) {
	segs, err := listSegments(ctx, st)
	if err != nil {
		return llmapi.AuditPage{}, err
	}
	// Newest segments first: once limit+1 matches are in hand, a line
	// older than the last of them is passed over without decoding it.
	slices.Reverse(segs)
	var all []llmapi.AuditEntry
	floor := ""
	for _, sg := range segs {
		if !q.since.IsZero() && sg.day < q.since.UTC().Format(time.DateOnly) ||
			!q.until.IsZero() && sg.day > q.until.UTC().Format(time.DateOnly) {
			continue
		}
		b, err := st.Load(ctx, sg.key)
		if err != nil {
			continue // pruned meanwhile
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if id, ok := lineID(line); ok && (id <= floor || q.cursor != "" && id >= q.cursor) {
				continue
			}
			var e llmapi.AuditEntry
			if json.Unmarshal(line, &e) == nil && (q.cursor == "" || e.ID < q.cursor) && q.match(e) {
				all = append(all, e)
			}
		}
		if len(all) > q.limit {
			slices.SortFunc(all, func(x, y llmapi.AuditEntry) int { return strings.Compare(y.ID, x.ID) })
			all = all[:q.limit+1]
			floor = all[q.limit].ID
		}
	}
	slices.SortFunc(all, func(x, y llmapi.AuditEntry) int { return strings.Compare(y.ID, x.ID) })
	p := llmapi.AuditPage{Entries: all, Source: "storage"}
	if len(all) > q.limit {
		p.Entries, p.Next = all[:q.limit], all[q.limit-1].ID
	}
	return p, nil
}

// lineID reads the id of an entry's line without decoding it: it is the
// first field, and holds no character JSON escapes.
func lineID(line []byte) (string, bool) {
	rest, ok := bytes.CutPrefix(line, []byte(`{"id":"`))
	if !ok {
		return "", false
	}
	i := bytes.IndexByte(rest, '"')
	if i < 0 {
		return "", false
	}
	return string(rest[:i]), true
}

const auditKey = "audit" // stream: one entry per change, every node's

// auditAdd appends e to the cluster's audit stream, trimmed to about max
// entries.
func (m *member) auditAdd(ctx context.Context, e llmapi.AuditEntry, max int) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return m.rdb.XAdd(ctx, &redis.XAddArgs{Stream: m.key(auditKey), MaxLen: int64(max), Approx: true,
		Values: []any{"e", b}}).Err()
}

var streamID = regexp.MustCompile(`^[0-9]+-[0-9]+$`)

// auditRead reads the cluster's audit stream, newest first, scanning at
// most max entries.
func (m *member) auditRead(ctx context.Context, q auditQuery, max int) (llmapi.AuditPage, error) {
	end, start := "+", "-"
	if !q.until.IsZero() {
		end = strconv.FormatInt(q.until.UnixMilli(), 10)
	}
	if q.cursor != "" {
		if !streamID.MatchString(q.cursor) {
			return llmapi.AuditPage{}, apiErr(http.StatusBadRequest, "cursor %s is not one of the cluster's audit stream; start again without cursor", catalog.Bounded(q.cursor))
		}
		end = "(" + q.cursor
	}
	if !q.since.IsZero() {
		start = strconv.FormatInt(q.since.UnixMilli(), 10)
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
			if !q.match(e) {
				continue
			}
			if len(p.Entries) == q.limit {
				p.Next = p.Entries[q.limit-1].ID
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

// getAudit answers GET /llm/audit?since=&until=&actor=&action=&model=&limit=&cursor=.
func getAudit(w http.ResponseWriter, r *http.Request) error {
	a, err := current(r)
	if err != nil {
		return err
	}
	q, err := parseAuditQuery(r)
	if err != nil {
		return err
	}
	if a.cluster != nil {
		p, err := a.cluster.auditRead(r.Context(), q, a.Audit.maxEntries())
		if err == nil {
			return writeJSON(w, p)
		}
		if _, bad := err.(caddy.APIError); bad {
			return err
		}
		if q.cursor != "" && streamID.MatchString(q.cursor) {
			return apiErr(http.StatusBadGateway, "reading the cluster's audit stream: %v; try again when the store answers", err)
		}
		p, lerr := readStorage(r.Context(), a.local, q)
		if lerr != nil {
			return apiErr(http.StatusInternalServerError, "reading the audit log: %v", lerr)
		}
		p.Warning = "the cluster store does not answer (" + err.Error() + "); these are this node's entries only"
		return writeJSON(w, p)
	}
	p, err := readStorage(r.Context(), a.local, q)
	if err != nil {
		return apiErr(http.StatusInternalServerError, "reading the audit log: %v", err)
	}
	if p.Entries == nil {
		p.Entries = []llmapi.AuditEntry{}
	}
	return writeJSON(w, p)
}

func parseAuditQuery(r *http.Request) (auditQuery, error) {
	v := r.URL.Query()
	q := auditQuery{actor: v.Get("actor"), action: v.Get("action"), model: v.Get("model"), cursor: v.Get("cursor"), limit: 100}
	for name, dst := range map[string]*time.Time{"since": &q.since, "until": &q.until} {
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
			return q, apiErr(http.StatusBadRequest, "%s=%s is neither an RFC 3339 time such as 2026-01-02T15:04:05Z nor a duration ago such as 1h", name, catalog.Bounded(s))
		}
		*dst = now().Add(-d)
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			return q, apiErr(http.StatusBadRequest, "limit=%s: use a number from 1 to 1000", catalog.Bounded(s))
		}
		q.limit = n
	}
	return q, nil
}
