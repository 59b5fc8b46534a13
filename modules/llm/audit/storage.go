package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// prefix is where the audit log lives in Caddy storage:
// llm/audit/<day>/<node>-<start>.jsonl, one JSON entry a line.
const (
	prefix          = "llm/audit"
	maxSegmentLines = 1000
)

// writer is the segment being written to one storage. It outlives
// configs (it lives in the pool, see Open), so a reload continues it.
type writer struct {
	mu    sync.Mutex
	key   string // the segment being written
	day   string
	lines [][]byte
	seq   uint64
}

// Destruct does nothing: every entry is in storage once append returns.
func (w *writer) Destruct() error { return nil }

// append gives e its ID and adds it to the segment being written, or to
// a new one when the day changed or the segment is full; a new segment
// prunes the log. now is the clock prune reads keep by.
func (w *writer) append(ctx context.Context, st certmagic.Storage, cfg *Config, e llmapi.AuditEntry, now time.Time) error {
	if st == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	e.ID = fmt.Sprintf("%019d.%s.%d", e.Time.UnixNano(), e.Node, w.seq)
	day := e.Time.Format(time.DateOnly)
	fresh := w.key == "" || w.day != day || len(w.lines) >= cfg.segmentLines()
	if fresh {
		w.day, w.lines = day, nil
		w.key = path.Join(prefix, day, fmt.Sprintf("%s-%019d.jsonl", safeSegment(e.Node), e.Time.UnixNano()))
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	w.lines = append(w.lines, b)
	if err := st.Store(ctx, w.key, bytes.Join(w.lines, []byte("\n"))); err != nil {
		return err
	}
	if fresh {
		return prune(ctx, st, cfg, w.key, now)
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

// segment is one segment file: its day and key.
type segment struct{ day, key string }

func listSegments(ctx context.Context, st certmagic.Storage) ([]segment, error) {
	keys, err := st.List(ctx, prefix, true)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []segment
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix+"/")
		day, file, ok2 := strings.Cut(rest, "/")
		if !ok || !ok2 || !strings.HasSuffix(file, ".jsonl") {
			continue
		}
		out = append(out, segment{day, k})
	}
	// Oldest first: by day, then by the segment's start.
	slices.SortFunc(out, func(x, y segment) int {
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

// prune removes segments older than keep, then the oldest segments
// while the entries kept and a full current segment would be more than
// max; current (just started) is never removed. So the log holds at most
// max entries. A segment is removed only while the log is within a
// segment of max, so it keeps at least max less two segments (half of max
// when that is less) once it has had that many, even when days cut
// segments short.
func prune(ctx context.Context, st certmagic.Storage, cfg *Config, current string, now time.Time) error {
	segs, err := listSegments(ctx, st)
	if err != nil {
		return err
	}
	oldest := now.UTC().Add(-cfg.keep()).Format(time.DateOnly)
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

// readStorage reads the audit log in Caddy storage, newest first.
func readStorage(ctx context.Context, st certmagic.Storage, q Query) (llmapi.AuditPage, error) {
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
		if !q.Since.IsZero() && sg.day < q.Since.UTC().Format(time.DateOnly) ||
			!q.Until.IsZero() && sg.day > q.Until.UTC().Format(time.DateOnly) {
			continue
		}
		b, err := st.Load(ctx, sg.key)
		if err != nil {
			continue // pruned meanwhile
		}
		for _, line := range bytes.Split(b, []byte("\n")) {
			if id, ok := lineID(line); ok && (id <= floor || q.Cursor != "" && id >= q.Cursor) {
				continue
			}
			var e llmapi.AuditEntry
			if json.Unmarshal(line, &e) == nil && (q.Cursor == "" || e.ID < q.Cursor) && q.Match(e) {
				all = append(all, e)
			}
		}
		if len(all) > q.Limit {
			slices.SortFunc(all, func(x, y llmapi.AuditEntry) int { return strings.Compare(y.ID, x.ID) })
			all = all[:q.Limit+1]
			floor = all[q.Limit].ID
		}
	}
	slices.SortFunc(all, func(x, y llmapi.AuditEntry) int { return strings.Compare(y.ID, x.ID) })
	p := llmapi.AuditPage{Entries: all, Source: "storage"}
	if len(all) > q.Limit {
		p.Entries, p.Next = all[:q.Limit], all[q.Limit-1].ID
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
