// Package licences keeps which tenants accepted which model's licence:
// a model whose catalog entry names a licence is served to a tenant only
// once an admin of the tenant (or the operator, for everyone) accepted
// it. A table is immutable: a change makes a new one.
package licences

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Acceptance is one acceptance of a model's licence: for a tenant (an
// organisation, team or project path; "" for everyone), by whom, when.
type Acceptance struct {
	Model   string    `json:"model"`
	Licence string    `json:"licence"`
	Tenant  string    `json:"tenant"`
	By      string    `json:"by"`
	At      time.Time `json:"at"`
}

// Table is the acceptances in force.
type Table struct {
	list []Acceptance
}

// Parse reads a table as Marshal writes it.
func Parse(b []byte) (*Table, error) {
	t := &Table{}
	if len(b) == 0 {
		return t, nil
	}
	if err := json.Unmarshal(b, &t.list); err != nil {
		return nil, fmt.Errorf("the licences' acceptances are corrupt: %w", err)
	}
	return t, nil
}

// Marshal writes the table.
func (t *Table) Marshal() []byte {
	b, _ := json.Marshal(t.All())
	return b
}

// All are the acceptances, oldest first.
func (t *Table) All() []Acceptance {
	if t == nil {
		return []Acceptance{}
	}
	return slices.Clone(t.list)
}

// With is the table with a added (in place of an acceptance of the same
// model, licence and tenant).
func (t *Table) With(a Acceptance) *Table {
	out := &Table{list: slices.DeleteFunc(t.All(), func(x Acceptance) bool {
		return x.Model == a.Model && x.Licence == a.Licence && x.Tenant == a.Tenant
	})}
	out.list = append(out.list, a)
	return out
}

// Accepted tells whether the licence of model is accepted for project
// (org/team/project; "" for a caller without a key's tenant): for
// everyone, or for the project or a level above it. An acceptance names
// the licence: a model whose licence changed needs accepting again.
func (t *Table) Accepted(model, licence, project string) bool {
	if t == nil {
		return false
	}
	for _, a := range t.list {
		if a.Model == model && a.Licence == licence && Under(project, a.Tenant) {
			return true
		}
	}
	return false
}

// Under tells whether project is tenant or below it ("" holds all).
func Under(project, tenant string) bool {
	return tenant == "" || project == tenant || strings.HasPrefix(project, tenant+"/")
}

// RefusedError is a request for a model whose licence its tenant has
// not accepted.
type RefusedError struct {
	Model, Licence, URL, Project string
}

func (e *RefusedError) Error() string {
	who := "your project " + e.Project
	tenant := e.Project
	if e.Project == "" {
		who, tenant = "callers without a tenant", ""
	}
	url := ""
	if e.URL != "" {
		url = " (" + e.URL + ")"
	}
	cmd := "llmgw ctl model licence accept " + e.Model
	if tenant != "" {
		cmd += " --tenant " + org(tenant)
	}
	return fmt.Sprintf("the model %s is served under the licence %s%s, which has not been accepted for %s; an admin of your organisation, or the operator for everyone, accepts it: %s",
		e.Model, e.Licence, url, who, cmd)
}

// org is the organisation of a tenant path.
func org(path string) string {
	o, _, _ := strings.Cut(path, "/")
	return o
}
