package place

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmgw/llmgw/modules/llm/catalog"
	"github.com/llmgw/llmgw/modules/llm/llmapi"
)

// SetGPUDevices sets the node's GPU devices: declared ones (which then
// also say how many GPUs the node has), else the indexes this process
// sees in CUDA_VISIBLE_DEVICES, else 0 to the node's GPUs minus one.
func (l *Ledger) SetGPUDevices(node *catalog.Resources, declared []int) error {
	c := l.Capacity()
	devs, err := GPUDevices(declared, os.Getenv("CUDA_VISIBLE_DEVICES"), c.GPUs)
	if err != nil {
		return err
	}
	if len(declared) > 0 && node != nil && node.GPUs > 0 && node.GPUs != len(declared) {
		return fmt.Errorf("node: gpus %d and gpu_devices %s disagree; gpu_devices alone says both", node.GPUs, joinInts(declared))
	}
	if c.GPUs != len(devs) {
		c.GPUs = len(devs)
		l.capacity.Store(&c)
	}
	l.devices.Store(&devs)
	return nil
}

// GPUDevices lists the devices a node of n GPUs hands out (see
// setGPUDevices); visible is this process's CUDA_VISIBLE_DEVICES.
func GPUDevices(declared []int, visible string, n int) ([]int, error) {
	if len(declared) > 0 {
		seen := map[int]bool{}
		for _, d := range declared {
			if d < 0 || seen[d] {
				return nil, fmt.Errorf("node: gpu_devices %s: give each device's index once, 0 or more", joinInts(declared))
			}
			seen[d] = true
		}
		return slices.Clone(declared), nil
	}
	if vis, ok := ParseInts(visible); ok && len(vis) > 0 {
		// The gateway itself was given these devices: its replicas get
		// them by the same names, and no more than the node has.
		return vis[:min(n, len(vis))], nil
	}
	out := make([]int, max(n, 0))
	for i := range out {
		out[i] = i
	}
	return out, nil
}

// ParseInts reads a comma-separated list of whole numbers.
func ParseInts(s string) ([]int, bool) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 {
			return nil, false
		}
		out = append(out, i)
	}
	return out, true
}

// freeGPUsLocked picks n of the node's devices that no placement holds,
// lowest first; nil when there are not that many (the ledger counts GPUs
// as it counts memory, so reserve found room for them).
func (l *Ledger) freeGPUsLocked(n int) []int { return l.freeGPUsIn(l.places, n) }

// freeGPUsIn picks n of the node's devices that none of places holds (a
// plan's copy of the ledger's, or the ledger's own).
func (l *Ledger) freeGPUsIn(places []*Placement, n int) []int {
	if n <= 0 {
		return nil
	}
	held := heldGPUs(places)
	var out []int
	if devs := l.devices.Load(); devs != nil {
		for _, d := range *devs {
			if len(out) < n && held[d] == nil {
				out = append(out, d)
			}
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}

// deviceUseLocked is the node's devices and those free; nil when it has
// none.
func (l *Ledger) deviceUseLocked() *llmapi.DeviceUse {
	devs := l.devices.Load()
	if devs == nil || len(*devs) == 0 {
		return nil
	}
	held := heldGPUs(l.places)
	u := &llmapi.DeviceUse{All: slices.Clone(*devs), Free: []int{}}
	for _, d := range *devs {
		if held[d] == nil {
			u.Free = append(u.Free, d)
		}
	}
	return u
}

// AwaitGPUs waits until no replica stopped to make room for p (an
// evicted placement, still in the ledger until its process has stopped)
// holds one of p's devices, at most limit: an engine that loads weights on
// a GPU another process still fills would fail for want of memory.
func (l *Ledger) AwaitGPUs(ctx context.Context, p *Placement, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for {
		l.mu.Lock()
		busy := false
		for _, q := range l.places {
			if q != p && q.evicted && slices.ContainsFunc(q.GPUs, func(d int) bool { return slices.Contains(p.GPUs, d) }) {
				busy = true
			}
		}
		l.mu.Unlock()
		if !busy || time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// heldGPUs maps each device held in places to the placement holding it.
func heldGPUs(places []*Placement) map[int]*Placement {
	held := map[int]*Placement{}
	for _, q := range places {
		if !q.evicted {
			for _, d := range q.GPUs {
				held[d] = q
			}
		}
	}
	return held
}

// gpusHeldLocked says, for a replica that cannot be placed, which
// replicas hold the devices it waits for; "" when GPUs are not short.
func (l *Ledger) gpusHeldLocked(need catalog.Resources) string {
	if need.GPUs == 0 {
		return ""
	}
	var parts []string
	free := 0
	if devs := l.devices.Load(); devs != nil {
		free = len(*devs)
	}
	for _, q := range l.places {
		if q.evicted || len(q.GPUs) == 0 {
			continue
		}
		free -= len(q.GPUs)
		who := "a replica of " + q.holder.Model().Name + " that is starting"
		if q.rep != nil {
			who = q.rep.ReplicaID()
		}
		parts = append(parts, fmt.Sprintf("%s by %s", joinInts(q.GPUs), who))
	}
	if free >= need.GPUs || len(parts) == 0 {
		return ""
	}
	return "; GPUs in use: " + strings.Join(parts, ", ")
}

// joinInts writes devices as CUDA_VISIBLE_DEVICES does: 0,1.
func joinInts(ds []int) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = strconv.Itoa(d)
	}
	return strings.Join(s, ",")
}
