package reqlog

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/modules/openai"
)

const (
	queueLen = 1 << 16 // requests waiting to be written
	// maxPending bounds the records kept while the store is away; beyond
	// it the oldest are dropped, and counted.
	maxPending = 200_000
	batchMax   = 1024
	batchWait  = 100 * time.Millisecond
)

// The collectors live for the process.
var (
	metricRecorded = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "llmgw", Subsystem: "request_log", Name: "records_total",
		Help: "Requests written to the request log."})
	metricDropped = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "llmgw", Subsystem: "request_log", Name: "dropped_total",
		Help: "Requests the request log dropped: its queue was full, or its store was away so long that too many waited."})
	metricPending = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "llmgw", Subsystem: "request_log", Name: "pending",
		Help: "Records waiting for the request log's store."})
)

// Collectors are the log's metrics, for the app to register.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{metricRecorded, metricDropped, metricPending}
}

// Log takes the requests the handlers hand it and writes them to its
// store off the request path.
type Log struct {
	in      chan *openai.Tracked
	open    func() (Store, error)
	store   atomic.Pointer[Store] // nil until open succeeded
	opening sync.Mutex            // one open at a time
	node    string
	keep    atomic.Pointer[Retention]
	log     *zap.Logger

	stop     chan struct{}
	finished chan struct{}
	once     sync.Once
}

// logs holds each store's Log, so a reload reuses it.
var logs = caddy.NewUsagePool()

// Options are what a config's Log is made of.
type Options struct {
	// Key names the store (its file, or the cluster's stream): configs
	// with the same key share one Log.
	Key string
	// Open opens the store. The log's goroutine calls it before its
	// first write, and again until it succeeds: a config that is only
	// checked (llmgw validate), or a second llmgw on the same data
	// directory, never waits for the file.
	Open   func() (Store, error)
	Node   string
	Keep   Retention
	Logger *zap.Logger
}

// Open returns the Log of o.Key, opening it if no config holds it, with
// o's retention. Release (the returned function) when the config stops.
func Open(o Options) (*Log, func(), error) {
	v, _, err := logs.LoadOrNew(o.Key, func() (caddy.Destructor, error) {
		l := &Log{in: make(chan *openai.Tracked, queueLen), open: o.Open, node: o.Node, log: o.Logger,
			stop: make(chan struct{}), finished: make(chan struct{})}
		go l.run()
		return l, nil
	})
	if err != nil {
		return nil, nil, err
	}
	l := v.(*Log)
	keep := o.Keep
	l.keep.Store(&keep)
	return l, func() { _, _ = logs.Delete(o.Key) }, nil
}

// Add hands a request over once its chain has returned. It never blocks:
// with the queue full the request is dropped, and counted.
func (l *Log) Add(t *openai.Tracked) {
	t.End = time.Now()
	select {
	case l.in <- t:
	default:
		metricDropped.Inc()
	}
}

// Destruct writes what is queued (for at most five seconds) and closes
// the store, when the last config using it stops.
func (l *Log) Destruct() error {
	l.once.Do(func() { close(l.stop) })
	<-l.finished
	if s := l.store.Load(); s != nil {
		return (*s).Close()
	}
	return nil
}

// opened returns the store, opening it if it is not yet.
func (l *Log) opened() (Store, error) {
	if s := l.store.Load(); s != nil {
		return *s, nil
	}
	l.opening.Lock()
	defer l.opening.Unlock()
	if s := l.store.Load(); s != nil {
		return *s, nil
	}
	s, err := l.open()
	if err != nil {
		return nil, err
	}
	l.store.Store(&s)
	return s, nil
}

// run writes batches until stopped.
func (l *Log) run() {
	defer close(l.finished)
	var pending []Entry
	tick := time.NewTicker(batchWait)
	defer tick.Stop()
	failing := false
	for {
		select {
		case t := <-l.in:
			pending = append(pending, entryOf(t, l.node))
			if len(pending) < batchMax {
				continue
			}
		case <-tick.C:
		case <-l.stop:
			l.finish(pending)
			return
		}
		pending = l.drain(pending)
		pending, failing = l.write(pending, failing)
	}
}

// drain adds what is queued, up to a batch.
func (l *Log) drain(pending []Entry) []Entry {
	for range batchMax {
		select {
		case t := <-l.in:
			pending = append(pending, entryOf(t, l.node))
		default:
			return pending
		}
	}
	return pending
}

// write writes pending and returns what is left: nothing, or all of it
// (bounded) when the store failed.
func (l *Log) write(pending []Entry, failing bool) ([]Entry, bool) {
	if len(pending) == 0 {
		return pending, failing
	}
	s, err := l.opened()
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = s.Append(ctx, pending, *l.keep.Load())
		cancel()
	}
	if err != nil {
		if !failing {
			l.log.Error("writing the request log; records wait in memory until the store answers", zap.Int("waiting", len(pending)), zap.Error(err))
		}
		if over := len(pending) - maxPending; over > 0 {
			metricDropped.Add(float64(over))
			pending = pending[over:]
		}
		metricPending.Set(float64(len(pending)))
		return pending, true
	}
	if failing {
		l.log.Info("the request log's store answers again")
	}
	metricRecorded.Add(float64(len(pending)))
	metricPending.Set(0)
	return pending[:0], false
}

// finish writes what is left at the end, trying for five seconds.
func (l *Log) finish(pending []Entry) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		pending = l.drain(pending)
		var failing bool
		if pending, failing = l.write(pending, false); failing && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if len(l.in) == 0 || time.Now().After(deadline) {
			if n := len(pending) + len(l.in); n > 0 {
				metricDropped.Add(float64(n))
				l.log.Error("the request log stopped with records it could not write", zap.Int("dropped", n))
			}
			return
		}
	}
}

// Page reads a page of the log.
func (l *Log) Page(ctx context.Context, f Filter) (llmapi.RequestPage, error) {
	s, err := l.opened()
	if err != nil {
		return llmapi.RequestPage{}, err
	}
	return s.Page(ctx, f)
}

// Get reads one request.
func (l *Log) Get(ctx context.Context, id string) (llmapi.RequestDetail, error) {
	s, err := l.opened()
	if err != nil {
		return llmapi.RequestDetail{}, err
	}
	return s.Get(ctx, id)
}
