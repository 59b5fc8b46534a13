package responsesapi

import (
	"container/list"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgw/llmgw/modules/openai"
)

// storeTTL is how long a stored response is kept (OpenAI keeps them 30
// days). The in-memory default forgets older ones sooner when it is full.
const storeTTL = 30 * 24 * time.Hour

// Bounds of the in-memory store: beyond either, the oldest responses
// are forgotten first.
const (
	memStoreItems = 10000
	memStoreBytes = 256 << 20
)

var defaultStore ResponseStore = newMemoryStore(memStoreItems, memStoreBytes)

// memoryStore is the in-memory ResponseStore of a single gateway: bounded
// in count and bytes, oldest evicted first, expired entries forgotten.
type memoryStore struct {
	mu       sync.Mutex
	items    map[memKey]*list.Element
	order    list.List // of *memEntry, oldest first
	bytes    int64
	maxItems int
	maxBytes int64
}

type memKey struct{ scope, id string }

type memEntry struct {
	key     memKey
	v       []byte
	expires time.Time
}

func newMemoryStore(maxItems int, maxBytes int64) *memoryStore {
	return &memoryStore{items: make(map[memKey]*list.Element), maxItems: maxItems, maxBytes: maxBytes}
}

// Put keeps v (the store keeps the slice: the caller must not change it).
func (s *memoryStore) Put(_ context.Context, scope, id string, v []byte, ttl time.Duration) error {
	size := int64(len(v) + len(scope) + len(id))
	if size > s.maxBytes {
		return fmt.Errorf("storing response %s: %d bytes is more than the store holds (%d)", id, size, s.maxBytes)
	}
	k := memKey{scope, id}
	t := respNow()
	s.mu.Lock()
	defer s.mu.Unlock()
	if el, ok := s.items[k]; ok {
		s.remove(el)
	}
	s.items[k] = s.order.PushBack(&memEntry{key: k, v: v, expires: t.Add(ttl)})
	s.bytes += size
	for el := s.order.Front(); el != nil; el = s.order.Front() {
		e := el.Value.(*memEntry)
		if len(s.items) <= s.maxItems && s.bytes <= s.maxBytes && t.Before(e.expires) {
			break
		}
		s.remove(el)
	}
	return nil
}

func (s *memoryStore) Get(_ context.Context, scope, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[memKey{scope, id}]
	if !ok {
		return nil, ErrNotStored
	}
	e := el.Value.(*memEntry)
	if !respNow().Before(e.expires) {
		s.remove(el)
		return nil, ErrNotStored
	}
	return e.v, nil
}

func (s *memoryStore) Delete(_ context.Context, scope, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.items[memKey{scope, id}]
	if !ok {
		return ErrNotStored
	}
	s.remove(el)
	return nil
}

func (s *memoryStore) remove(el *list.Element) {
	e := s.order.Remove(el).(*memEntry)
	delete(s.items, e.key)
	s.bytes -= int64(len(e.v) + len(e.key.scope) + len(e.key.id))
}

// A stored record is {"response":{…},"messages":[…],"input":…}: the
// response object as GET returns it, the conversation in chat form
// (without instructions) for a later previous_response_id, and the
// client's input for GET …/input_items.

// recordMember returns one member of a stored record, or nil.
func recordMember(rec []byte, key string) []byte {
	var out []byte
	_ = openai.EachMember(rec, func(k, v []byte) error {
		if string(k) == key {
			out = v
		}
		return nil
	})
	return out
}

// newID returns prefix followed by 48 random hex digits.
func newID(prefix string) string {
	var b [24]byte
	openai.FillRandom(b[:])
	out := make([]byte, len(prefix)+48)
	copy(out, prefix)
	hex.Encode(out[len(prefix):], b[:])
	return string(out)
}

// ServeStoredResponse answers the stored-response endpoints for the
// response id (the path after /v1/responses/): GET returns the response
// object, DELETE forgets it, and GET of "{id}/input_items" lists its input
// items (query: limit 1-100, default 20; order asc or desc, default desc;
// after an item id). A response is visible only to the key that created
// it (Scope); an unknown id is a 404 in OpenAI's shape.
func ServeStoredResponse(w http.ResponseWriter, r *http.Request, id string) {
	id, sub, _ := strings.Cut(strings.Trim(id, "/"), "/")
	switch {
	case sub == "" && r.Method == http.MethodGet, sub == "input_items" && r.Method == http.MethodGet:
	case sub == "" && r.Method == http.MethodDelete:
		err := currentStore().Delete(r.Context(), openai.Scope(r), id)
		if err != nil {
			storeError(id, err).Write(w)
			return
		}
		writeJSON(w, http.StatusOK, []byte(`{"id":"`+jsonEscape(id)+`","object":"response","deleted":true}`))
		return
	case sub == "" || sub == "input_items":
		w.Header().Set("Allow", "GET, DELETE")
		(&openai.Error{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error", Code: "method_not_allowed",
			Message: fmt.Sprintf("%s is not allowed here; use GET or DELETE", r.Method)}).Write(w)
		return
	default:
		(&openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("no such endpoint: /v1/responses/%s/%s", id, sub)}).Write(w)
		return
	}
	rec, err := currentStore().Get(r.Context(), openai.Scope(r), id)
	if err != nil {
		storeError(id, err).Write(w)
		return
	}
	if sub == "" {
		writeJSON(w, http.StatusOK, recordMember(rec, "response"))
		return
	}
	items, e := inputItems(id, recordMember(rec, "input"), r)
	if e != nil {
		e.Write(w)
		return
	}
	writeJSON(w, http.StatusOK, items)
}

func storeError(id string, err error) *openai.Error {
	if errors.Is(err, ErrNotStored) {
		return &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "not_found",
			Message: fmt.Sprintf("No response found with id '%s'.", id)}
	}
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "store_unavailable",
		Message: fmt.Sprintf("reading stored response %s: %v; try again", id, err)}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// jsonEscape returns s escaped for a JSON string's inside.
func jsonEscape(s string) string {
	q, _ := json.Marshal(s)
	return string(q[1 : len(q)-1])
}

// ResponseStore keeps stored Responses (store: true) for
// previous_response_id and GET/DELETE /v1/responses/{id}. Scope is the
// caller's key: a response is visible only to the key that made it.
type ResponseStore interface {
	Put(ctx context.Context, scope, id string, v []byte, ttl time.Duration) error
	// Get returns ErrNotStored for an unknown id (or one of another scope).
	Get(ctx context.Context, scope, id string) ([]byte, error)
	// Delete returns ErrNotStored for an unknown id.
	Delete(ctx context.Context, scope, id string) error
}

// ErrNotStored is a ResponseStore's answer for an id it does not hold.
var ErrNotStored = errors.New("no stored response with this id")

var responseStore atomic.Pointer[storeBox]

type storeBox struct{ s ResponseStore }

// SetResponseStore sets where stored responses are kept (the llm app sets
// Redis in a cluster). Nil restores the in-memory default.
func SetResponseStore(s ResponseStore) {
	if s == nil {
		responseStore.Store(nil)
		return
	}
	responseStore.Store(&storeBox{s})
}

// currentStore returns the store in use.
func currentStore() ResponseStore {
	if b := responseStore.Load(); b != nil {
		return b.s
	}
	return defaultStore
}
