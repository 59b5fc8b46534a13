package tenancy

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Body is the body of POST, PUT and PATCH on the tenancy routes of the
// admin API (/llm/tenants/…).
type Body struct {
	Name     string    `json:"name,omitempty"` // POST only
	Limits   *Limits   `json:"limits,omitempty"`
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Route is a parsed path under /llm/tenants: a collection (the orgs, an
// org's teams, a team's projects) or one level.
type Route struct {
	Parent string // the collection's parent level, "" for the orgs
	Path   string // the level, "" for a collection
	Kind   string
}

// ParseRoute reads /llm/tenants/orgs[/{org}[/teams[/{team}[/projects[/{project}]]]]].
func ParseRoute(p string) (Route, bool) {
	rest := strings.Trim(strings.TrimPrefix(p, "/llm/tenants"), "/")
	if rest == "" {
		return Route{}, true
	}
	segs := strings.Split(rest, "/")
	coll := [...]string{"orgs", "teams", "projects"}
	var names []string
	for i, s := range segs {
		if i%2 == 0 {
			if i/2 >= len(coll) || s != coll[i/2] {
				return Route{}, false
			}
			continue
		}
		if s == "" {
			return Route{}, false
		}
		names = append(names, s)
	}
	rt := Route{Kind: KindAt((len(segs) + 1) / 2)}
	if len(segs)%2 == 1 {
		rt.Parent = strings.Join(names, "/")
		return rt, true
	}
	rt.Path = strings.Join(names, "/")
	rt.Parent = strings.Join(names[:len(names)-1], "/")
	return rt, true
}

// CollectionPath is the route of the collection the level is created in.
func (rt Route) CollectionPath() string {
	if rt.Parent == "" {
		return "orgs"
	}
	parts := strings.Split(rt.Parent, "/")
	if len(parts) == 1 {
		return "orgs/" + parts[0] + "/teams"
	}
	return "orgs/" + parts[0] + "/teams/" + parts[1] + "/projects"
}

// Check checks a body's values; a capacity of nothing is none.
func (b *Body) Check() error {
	if err := b.Limits.Validate(); err != nil {
		return fmt.Errorf("limits: %w", err)
	}
	if err := b.Capacity.Validate(); err != nil {
		return fmt.Errorf("capacity: %w", err)
	}
	if b.Capacity.IsZero() {
		b.Capacity = nil
	}
	return nil
}

// DecodeBody reads raw into dst, refusing members it does not know.
func DecodeBody(raw []byte, dst *Body) error {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil && err != io.EOF {
		return fmt.Errorf(`the body must be JSON like {"limits":{"requests_per_minute":600},"capacity":{"replicas":10}}: %w`, err)
	}
	return nil
}

// MergePatch applies the JSON merge patch raw (RFC 7386) to cur into dst.
func MergePatch(cur *Body, raw []byte, dst *Body) error {
	var patch map[string]any
	if err := json.Unmarshal(raw, &patch); err != nil {
		return fmt.Errorf(`the body must be a JSON merge patch like {"limits":{"requests_per_minute":600}}: %w`, err)
	}
	b, _ := json.Marshal(cur)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	merged, _ := json.Marshal(mergeValue(doc, patch))
	return DecodeBody(merged, dst)
}

func mergeValue(doc any, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	d, ok := doc.(map[string]any)
	if !ok {
		d = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(d, k)
			continue
		}
		d[k] = mergeValue(d[k], v)
	}
	return d
}
