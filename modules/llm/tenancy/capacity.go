package tenancy

import (
	"fmt"
)

// Capacity is what the models an organisation, team or project owns may
// hold at once: the sum over their replicas (a model names its owner with
// owner org[/team[/project]]). A zero field sets no limit. A level's
// models count against every level above it too, so a team's capacity
// can only narrow its organisation's.
type Capacity struct {
	// Memory in bytes (the Caddyfile takes sizes such as 64GiB).
	Memory int64 `json:"memory,omitempty"`
	Cores  int   `json:"cores,omitempty"`
	GPUs   int   `json:"gpus,omitempty"`
	// Replicas caps the number of replicas.
	Replicas int `json:"replicas,omitempty"`
}

// Validate checks the capacity is not negative.
func (c *Capacity) Validate() error {
	if c != nil && (c.Memory < 0 || c.Cores < 0 || c.GPUs < 0 || c.Replicas < 0) {
		return fmt.Errorf("capacity must not be negative")
	}
	return nil
}

// IsZero tells whether c sets no bound.
func (c *Capacity) IsZero() bool { return c == nil || *c == Capacity{} }
