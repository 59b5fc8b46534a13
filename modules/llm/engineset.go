package llm

import (
	"sort"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgw/llmgw/plugins/host"
)

// engineSet is the engine plugins a config runs, by type. A model of a
// new engine type added at run time (an add, a plan, a live change)
// starts its plugin while request handlers read the set, so it is read
// and written only through these methods.
type engineSet struct {
	load sync.Mutex   // serializes starting plugins: each type starts once
	mu   sync.RWMutex // guards the fields below
	m    map[string]*host.Plugin
	keys []string // the plugin pool's keys this config holds
}

func newEngineSet() *engineSet { return &engineSet{m: map[string]*host.Plugin{}} }

// get returns the plugin of an engine type, if this config runs one.
func (s *engineSet) get(typ string) (*host.Plugin, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.m[typ]
	return p, ok
}

// loadOnce returns the plugin of typ, starting it with start (under
// the pool key key) unless this config already runs one.
func (s *engineSet) loadOnce(typ, key string, start func() (caddy.Destructor, error)) (*host.Plugin, error) {
	s.load.Lock()
	defer s.load.Unlock()
	if p, ok := s.get(typ); ok {
		return p, nil
	}
	v, _, err := plugins.LoadOrNew(key, start)
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

// all returns the plugins by type, sorted by type.
func (s *engineSet) all() (types []string, ps []*host.Plugin) {
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

// poolKeys are the plugin pool's keys this config holds, to release.
func (s *engineSet) poolKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string(nil), s.keys...)
}
