package llmadmin

import (
	"sync"
	"time"
)

var now = time.Now

// limiter counts wrong tokens per client IP in fixed windows; a client
// that reaches the limit is refused until its window ends.
type limiter struct {
	max    int
	window time.Duration

	mu      sync.Mutex
	clients map[string]*failures
}

type failures struct {
	start time.Time
	n     int
}

// maxClients bounds the table: past it, expired windows are dropped.
const maxClients = 10000

func newLimiter(max int, window time.Duration) *limiter {
	return &limiter{max: max, window: window, clients: map[string]*failures{}}
}

// blocked returns how long ip must wait, or 0 when it may try.
func (l *limiter) blocked(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.clients[ip]
	if f == nil || f.n < l.max {
		return 0
	}
	left := f.start.Add(l.window).Sub(now())
	if left <= 0 {
		delete(l.clients, ip)
		return 0
	}
	return left
}

// fail counts a wrong token from ip and reports whether it reached the
// limit with this one.
func (l *limiter) fail(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := now()
	f := l.clients[ip]
	if f == nil || t.Sub(f.start) >= l.window {
		if len(l.clients) >= maxClients {
			l.sweep(t)
		}
		f = &failures{start: t}
		l.clients[ip] = f
	}
	f.n++
	return f.n == l.max
}

// Destruct lets the limiter live in a caddy.UsagePool.
func (l *limiter) Destruct() error { return nil }

func (l *limiter) sweep(t time.Time) {
	for ip, f := range l.clients {
		if t.Sub(f.start) >= l.window {
			delete(l.clients, ip)
		}
	}
}
