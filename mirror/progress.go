package mirror

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
)

// now is the clock; tests replace it.
var now = time.Now

// Transfer is one file moving into a store or to the node cache. Its
// counters are read while it runs, for logs, the admin view and the CLI.
type Transfer struct {
	Kind    string // "add", "copy", "fetch", "download"
	Model   string
	Version string
	File    string
	Store   string
	Total   int64
	Started time.Time

	done atomic.Int64
}

// Add counts n more bytes moved.
func (t *Transfer) Add(n int64) {
	if t != nil {
		t.done.Add(n)
	}
}

// Done is the bytes moved so far.
func (t *Transfer) Done() int64 {
	if t == nil {
		return 0
	}
	return t.done.Load()
}

func (t *Transfer) counter() io.Writer {
	if t == nil {
		return io.Discard
	}
	return (*transferWriter)(t)
}

type transferWriter Transfer

func (w *transferWriter) Write(p []byte) (int, error) {
	(*Transfer)(w).done.Add(int64(len(p)))
	return len(p), nil
}

// Progress is a snapshot of a transfer.
type Progress struct {
	Kind    string  `json:"kind"`
	Model   string  `json:"model"`
	Version string  `json:"version"`
	File    string  `json:"file"`
	Store   string  `json:"store,omitempty"`
	Bytes   int64   `json:"bytes"`
	Total   int64   `json:"total"`
	Rate    float64 `json:"bytes_per_second"`
	ETA     float64 `json:"eta_seconds"`
}

// Snapshot reads the transfer's progress: bytes, rate and time left.
func (t *Transfer) Snapshot() Progress {
	p := Progress{Kind: t.Kind, Model: t.Model, Version: t.Version, File: t.File, Store: t.Store, Bytes: t.Done(), Total: t.Total}
	if el := now().Sub(t.Started).Seconds(); el > 0 {
		p.Rate = float64(p.Bytes) / el
	}
	if p.Rate > 0 && p.Total > p.Bytes {
		p.ETA = float64(p.Total-p.Bytes) / p.Rate
	}
	return p
}

func (p Progress) String() string {
	pct := 100.0
	if p.Total > 0 {
		pct = 100 * float64(p.Bytes) / float64(p.Total)
	}
	return fmt.Sprintf("%s %s/%s %s: %s of %s (%.0f%%), %s/s, %s left", p.Kind, p.Model, p.Version, p.File,
		humanize.IBytes(uint64(p.Bytes)), humanize.IBytes(uint64(p.Total)), pct, humanize.IBytes(uint64(p.Rate)), (time.Duration(p.ETA) * time.Second).String())
}

// transfers is the set of transfers under way, and the bytes moved by
// those that ended, by kind and store.
type transfers struct {
	mu    sync.Mutex
	set   map[*Transfer]struct{}
	moved map[[2]string]int64
}

func (ts *transfers) start(t *Transfer) *Transfer {
	t.Started = now()
	ts.mu.Lock()
	if ts.set == nil {
		ts.set = make(map[*Transfer]struct{})
	}
	ts.set[t] = struct{}{}
	ts.mu.Unlock()
	return t
}

func (ts *transfers) end(t *Transfer) {
	ts.mu.Lock()
	delete(ts.set, t)
	if ts.moved == nil {
		ts.moved = make(map[[2]string]int64)
	}
	ts.moved[[2]string{t.Kind, t.Store}] += t.Done()
	ts.mu.Unlock()
}

// BytesMoved is the bytes moved so far, by kind ("add", "copy", "fetch",
// "download") and store, counting transfers under way.
func (m *Mirror) BytesMoved() map[[2]string]int64 {
	ts := &m.tr
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make(map[[2]string]int64, len(ts.moved)+len(ts.set))
	for k, v := range ts.moved {
		out[k] = v
	}
	for t := range ts.set {
		out[[2]string{t.Kind, t.Store}] += t.Done()
	}
	return out
}

func (ts *transfers) list() []Progress {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make([]Progress, 0, len(ts.set))
	for t := range ts.set {
		out = append(out, t.Snapshot())
	}
	return out
}
