package llmkb

import "sync"

// queue is the files waiting to be ingested, by store-file id, each once.
type queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	items  []string
	queued map[string]bool
	closed bool
}

func newQueue() *queue {
	q := &queue{queued: map[string]bool{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// push adds id unless it is already waiting.
func (q *queue) push(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queued[id] || q.closed {
		return
	}
	q.queued[id] = true
	q.items = append(q.items, id)
	q.cond.Signal()
}

// pop waits for an id; false once the queue is closed.
func (q *queue) pop() (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	id := q.items[0]
	q.items[0] = ""
	q.items = q.items[1:]
	delete(q.queued, id)
	return id, true
}

// len is the files waiting.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// close wakes the workers to stop.
func (q *queue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}
