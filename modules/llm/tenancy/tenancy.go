package tenancy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// tenantEntry is one level of the tenancy tree created or changed through
// the admin API. A level the config file declares is overlaid: its limits
// and capacity are replaced by the entry's. Any other is created, under
// its parent (which the file or another entry declares).
type Entry struct {
	Path     string    `json:"path"` // acme, acme/research or acme/research/alpha
	Limits   *Limits   `json:"limits,omitempty"`
	Capacity *Capacity `json:"capacity,omitempty"`
	// Overlay is true for a change to a level of the config file; when
	// the file no longer declares it, the entry is dropped rather than
	// bringing the level back.
	Overlay bool      `json:"overlay,omitempty"`
	Created time.Time `json:"created,omitzero"`
	Changed time.Time `json:"changed,omitzero"`
}

// tenancy is the tree in force: the config's with the runtime entries laid
// over it.
type Tree struct {
	orgs    []*Org
	entries []*Entry
	config  map[string]bool // the paths the config file declares
}

var tenantKinds = [...]string{"", "org", "team", "project"}

// PathKind is the kind of the level at path: org, team or project.
func PathKind(path string) string { return tenantKinds[strings.Count(path, "/")+1] }

// ConfigPaths lists the levels the config declares.
func ConfigPaths(orgs []*Org) map[string]bool {
	out := map[string]bool{}
	for _, o := range orgs {
		out[o.Name] = true
		for _, t := range o.Teams {
			out[o.Name+"/"+t.Name] = true
			for _, p := range t.Projects {
				out[o.Name+"/"+t.Name+"/"+p.Name] = true
			}
		}
	}
	return out
}

// mergeTenancy lays entries over the config's tree. It copies the levels
// it changes; the config's own are never written. An entry that no longer
// fits (its parent is gone, its level left the file) is returned in
// dropped with the reason.
func Merge(config []*Org, entries []*Entry) (*Tree, map[string]string) {
	t := &Tree{config: ConfigPaths(config)}
	for _, o := range config {
		co := *o
		co.Teams = make([]*Team, len(o.Teams))
		for i, tm := range o.Teams {
			ct := *tm
			ct.Projects = make([]*Project, len(tm.Projects))
			for j, p := range tm.Projects {
				cp := *p
				ct.Projects[j] = &cp
			}
			co.Teams[i] = &ct
		}
		t.orgs = append(t.orgs, &co)
	}
	sorted := slices.Clone(entries)
	slices.SortStableFunc(sorted, func(a, b *Entry) int {
		return strings.Count(a.Path, "/") - strings.Count(b.Path, "/")
	})
	dropped := map[string]string{}
	for _, e := range sorted {
		if e.Overlay && !t.config[e.Path] {
			dropped[e.Path] = "the config file no longer declares it"
			continue
		}
		if !e.Overlay && t.config[e.Path] {
			dropped[e.Path] = "the config file declares it now; the file's limits apply"
			continue
		}
		if err := CheckEntryPath(e.Path); err != nil {
			dropped[e.Path] = err.Error() // made before the rule
			continue
		}
		if why := t.Apply(e); why != "" {
			dropped[e.Path] = why
			continue
		}
		t.entries = append(t.entries, e)
	}
	return t, dropped
}

// CheckEntryPath checks each name of a runtime level's path against the
// id rule.
func CheckEntryPath(path string) error {
	for i, name := range strings.Split(path, "/") {
		if err := catalog.CheckID(tenantKinds[min(i+1, 3)]+" name", name); err != nil {
			return err
		}
	}
	return nil
}

// Apply lays one entry on the tree, or says why it cannot.
func (t *Tree) Apply(e *Entry) string {
	parts := strings.Split(e.Path, "/")
	if len(parts) > 3 {
		return "a path has at most three parts"
	}
	var org *Org
	for _, o := range t.orgs {
		if o.Name == parts[0] {
			org = o
		}
	}
	if len(parts) == 1 {
		if org == nil {
			org = &Org{Name: parts[0]}
			t.orgs = append(t.orgs, org)
		}
		org.Limits, org.Capacity = e.Limits, e.Capacity
		return ""
	}
	if org == nil {
		return "its organisation " + parts[0] + " is gone"
	}
	var team *Team
	for _, tm := range org.Teams {
		if tm.Name == parts[1] {
			team = tm
		}
	}
	if len(parts) == 2 {
		if team == nil {
			team = &Team{Name: parts[1]}
			org.Teams = append(org.Teams, team)
		}
		team.Limits, team.Capacity = e.Limits, e.Capacity
		return ""
	}
	if team == nil {
		return "its team " + parts[0] + "/" + parts[1] + " is gone"
	}
	for _, p := range team.Projects {
		if p.Name == parts[2] {
			p.Limits, p.Capacity = e.Limits, e.Capacity
			return ""
		}
	}
	team.Projects = append(team.Projects, &Project{Name: parts[2], Limits: e.Limits, Capacity: e.Capacity})
	return ""
}

// Find returns the level at path, its limits and capacity.
func (t *Tree) Find(path string) (limits *Limits, capacity *Capacity, ok bool) {
	parts := strings.Split(path, "/")
	for _, o := range t.orgs {
		if o.Name != parts[0] {
			continue
		}
		if len(parts) == 1 {
			return o.Limits, o.Capacity, true
		}
		for _, tm := range o.Teams {
			if tm.Name != parts[1] {
				continue
			}
			if len(parts) == 2 {
				return tm.Limits, tm.Capacity, true
			}
			for _, p := range tm.Projects {
				if len(parts) == 3 && p.Name == parts[2] {
					return p.Limits, p.Capacity, true
				}
			}
		}
	}
	return nil, nil, false
}

// Children lists the paths of the levels right under path.
func (t *Tree) Children(path string) []string {
	var out []string
	for _, p := range t.Paths() {
		if strings.HasPrefix(p, path+"/") && !strings.Contains(p[len(path)+1:], "/") {
			out = append(out, p)
		}
	}
	return out
}

// Paths lists every level, in tree order.
func (t *Tree) Paths() []string {
	var out []string
	for _, o := range t.orgs {
		out = append(out, o.Name)
		for _, tm := range o.Teams {
			out = append(out, o.Name+"/"+tm.Name)
			for _, p := range tm.Projects {
				out = append(out, o.Name+"/"+tm.Name+"/"+p.Name)
			}
		}
	}
	return out
}

// CheckLevelName checks the name of an organisation, team or project
// (kind): its rule, and that full (its path) is not in seen.
func CheckLevelName(kind, name string, seen map[string]bool, full string) error {
	if err := catalog.CheckID(kind+" name", name); err != nil {
		return err
	}
	if seen[full] {
		return fmt.Errorf("%s %q is declared twice", kind, full)
	}
	seen[full] = true
	return nil
}

// Orgs are the organisations of the tree in force.
func (t *Tree) Orgs() []*Org { return t.orgs }

// Entries are the runtime entries laid over the config's tree.
func (t *Tree) Entries() []*Entry { return t.entries }

// InConfig tells whether the config file declares the level at path.
func (t *Tree) InConfig(path string) bool { return t.config[path] }

// KindAt names the kind of a level depth levels down: 1 org, 2 team,
// 3 project.
func KindAt(depth int) string { return tenantKinds[depth] }

// Node is the level's node name for counters and usage: its kind's
// initial, a colon and its name.
func (l *Level) Node() string {
	if l.node != "" {
		return l.node
	}
	return l.Kind[:1] + ":" + l.Name
}
