package place

import (
	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// PlanOn places n replicas of m on a copy of the ledger with fit, the
// function reserve uses, and changes nothing.
func (l *Ledger) PlanOn(m *catalog.Model, n int, nodeName string) llmapi.Plan {
	return l.PlanWithout(m, n, nodeName, nil)
}

// PlanWithout plans as planOn does, as if the replicas of without (when
// set) were gone: the room a replacement of all of them has.
func (l *Ledger) PlanWithout(m *catalog.Model, n int, nodeName string, without Holder) llmapi.Plan {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.Capacity()
	places := make([]*Placement, 0, len(l.places))
	for _, q := range l.places {
		if without != nil && q.holder == without {
			continue
		}
		cp := *q
		places = append(places, &cp)
	}
	rank := catalog.ClassRank(m.Class)
	pl := llmapi.Plan{Model: m.Name, Fits: true, Replicas: []llmapi.PlannedReplica{}, Evict: []llmapi.PlannedEviction{}}
	for range n {
		ch := choose(c, places, l.owners.Load(), m, rank, m.Shapes(), true) // profiles.go
		if ch.profile < 0 {
			pl.Fits, pl.Reason = false, ch.why
			if ownerCheck(l.owners.Load(), m.Owner, places, m.Needs()) == "" { // short of room, not of the owner's capacity
				pl.Missing = missing(c, places, m.Needs(), rank)
			}
			break
		}
		for _, q := range ch.victims {
			q.evicted = true
			pl.Evict = append(pl.Evict, llmapi.PlannedEviction{Model: q.holder.Model().Name, Replica: q.rep.ReplicaID(),
				Class: catalog.ClassName(q.holder.Model().Class), Resources: AmountsOf(q.need)})
		}
		need := m.Shape(ch.profile).Needs()
		np := &Placement{need: need, rank: rank, owner: m.Owner, GPUs: l.freeGPUsIn(places, need.GPUs)}
		places = append(places, np)
		pl.Replicas = append(pl.Replicas, llmapi.PlannedReplica{Node: nodeName, Resources: AmountsOf(need), GPUs: np.GPUs,
			Profile: m.Shape(ch.profile).ProfileName(), Note: ch.note})
	}
	return pl
}

// missing is what need lacks on the node once every replica of a lower
// class is counted as stopped.
func missing(c catalog.Resources, places []*Placement, need catalog.Resources, rank int) *llmapi.Amounts {
	room := c
	for _, q := range places {
		if !q.evicted && !(q.rep != nil && q.rank < rank) {
			room = room.Add(q.need, -1)
		}
	}
	short := need.Add(room, -1)
	out := llmapi.Amounts{Memory: max(short.Memory, 0), Cores: max(short.Cores, 0), GPUs: max(short.GPUs, 0)}
	return &out
}
