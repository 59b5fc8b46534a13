package place

import (
	"fmt"
	"strings"

	"github.com/llmgw/llmgw/modules/llm/catalog"
)

// choice is where one replica of a model would go on a node: the profile
// (an index in the model's profiles; 0 for a model without), the
// replicas of lower classes to stop first, why the profiles before it
// were passed over (Note), or, when none fits, why (Why).
type choice struct {
	profile int
	victims []*Placement
	note    string
	why     string
}

// choose places one replica of m, of class rank, on a node of capacity
// c holding places, with owners' capacities t: the first of its first
// upto profiles that fits in the free room, else the first that fits once
// replicas of lower classes stop (when evict). A CPU profile waits while
// the free GPUs would take a GPU profile of the model (cpuWait). It
// changes nothing.
func choose(c catalog.Resources, places []*Placement, t *OwnerTable, m *catalog.Model, rank, upto int, evict bool) choice {
	passes := []int{0}
	if evict {
		passes = append(passes, rank)
	}
	var whys []string
	for _, r := range passes {
		whys = whys[:0]
		for i := range upto {
			s := m.Shape(i)
			need := s.Needs()
			why := cpuWait(c, places, m, need)
			if why == "" {
				why = ownerCheck(t, m.Owner, places, need) // the owner's capacity (owners.go)
			}
			var victims []*Placement
			if why == "" {
				victims, why = fit(c, places, need, r)
			}
			if why == "" {
				return choice{profile: i, victims: victims, note: passedOver(m, whys)}
			}
			whys = append(whys, profileWhy(s, why))
		}
	}
	if len(m.Profiles) == 0 {
		return choice{profile: -1, why: whys[0]}
	}
	return choice{profile: -1, why: strings.Join(whys, "; ")}
}

// cpuWait is why a CPU profile (need asks no GPU) of m does not take a
// replica now: the node has free as many GPUs as a GPU profile of the
// model needs, and the model does not prefer the CPU. It is "" otherwise.
func cpuWait(c catalog.Resources, places []*Placement, m *catalog.Model, need catalog.Resources) string {
	if need.GPUs > 0 || m.Prefer == catalog.PreferCPU {
		return ""
	}
	g := m.GPUProfileNeed()
	if g == 0 {
		return ""
	}
	free := c.GPUs
	for _, q := range places {
		if !q.evicted {
			free -= q.need.GPUs
		}
	}
	if free < g {
		return ""
	}
	are := "are"
	if free == 1 {
		are = "is"
	}
	return fmt.Sprintf("it would run on the CPU while %s %s free (a GPU profile needs %d); put prefer cpu in model %q if running it on the CPU is on purpose",
		Plural(free, "GPU"), are, g, m.Name)
}

// profileWhy names the profile a reason is about (nothing for a model
// without profiles).
func profileWhy(s *catalog.Model, why string) string {
	if s.ProfileName() == "" {
		return why
	}
	return "profile " + s.ProfileName() + ": " + why
}

// passedOver says why the profiles before the one chosen were not.
func passedOver(m *catalog.Model, whys []string) string {
	if len(whys) == 0 {
		return ""
	}
	return "not on an earlier profile: " + strings.Join(whys, "; ")
}

// ReserveBetter claims room, without stopping any replica, for a replica
// of f on one of the profiles before than (a replica running on profile
// than moves back to it). It returns nil when none has room.
func (l *Ledger) ReserveBetter(f Holder, than int) *Placement {
	m := f.Model()
	l.mu.Lock()
	defer l.mu.Unlock()
	ch := choose(l.Capacity(), l.places, l.owners.Load(), m, 0, min(than, m.Shapes()), false)
	if ch.profile < 0 {
		return nil
	}
	p := &Placement{holder: f, need: m.Shape(ch.profile).Needs(), rank: catalog.ClassRank(m.Class), Profile: ch.profile, Note: ch.note}
	l.placeLocked(p)
	return p
}
