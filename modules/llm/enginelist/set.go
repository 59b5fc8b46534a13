package enginelist

import (
	"sort"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/plugins/host"
)

// Set is the engine plugins a config runs, by type. A model of a
// new engine type added at run time (an add, a plan, a live change)
// starts its plugin while request handlers read the set, so it is read
// and written only through these methods.
type Set struct {
	load sync.Mutex   // serializes starting plugins: each type starts once
	mu   sync.RWMutex // guards the fields below
	m    map[string]*host.Plugin
	keys []string // the plugin pool's keys this config holds
}

// NewSet returns an empty set.
func NewSet() *Set { return &Set{m: map[string]*host.Plugin{}} }

// Get returns the plugin of an engine type, if this config runs one.
func (s *Set) Get(typ string) (*host.Plugin, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.m[typ]
	return p, ok
}

// LoadOnce returns the plugin of typ, starting it with start (under
// the pool key key) unless this config already runs one.
func (s *Set) LoadOnce(typ, key string, start func() (caddy.Destructor, error)) (*host.Plugin, error) {
	s.load.Lock()
	defer s.load.Unlock()
	if p, ok := s.Get(typ); ok {
		return p, nil
	}
	v, _, err := pool.LoadOrNew(key, start)
	if err != nil {
		return nil, err
	}
	p := v.(*host.Plugin)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[typ] = p
	s.keys = append(s.keys, key)
	return p, nil
}

// All returns the plugins by type, sorted by type.
func (s *Set) All() (types []string, ps []*host.Plugin) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for typ := range s.m {
		types = append(types, typ)
	}
	sort.Strings(types)
	for _, typ := range types {
		ps = append(ps, s.m[typ])
	}
	return types, ps
}

// PoolKeys are the plugin pool's keys this config holds, to release.
func (s *Set) PoolKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string(nil), s.keys...)
}

// Release lets go of the plugins the set holds: the last config holding
// one stops it.
func (s *Set) Release() {
	for _, k := range s.PoolKeys() {
		_, _ = pool.Delete(k)
	}
}

// pool holds the running engine plugins across configs: a reload that
// keeps an engine keeps its plugin process.
var pool = caddy.NewUsagePool()
