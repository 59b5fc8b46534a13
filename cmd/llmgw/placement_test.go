package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/llmgw/modules/llm/llmapi"
	"github.com/llmgw/llmgw/plugins/engine"
)

// Replicas start only where they fit; a higher class makes room by
// stopping lower ones, never a critical model's; why a model is not
// running shows in the admin API and in the 503 a client gets.
func TestPlacementByResourcesAndClass(t *testing.T) {
	g := startGateway(t, `
		node {
			memory 4GiB
			cores 64
		}
		model bulk {
			engine sim
			class opportunistic
			resources {
				memory 3GiB
			}
		}
		model std {
			engine sim
			min 0
			resources {
				memory 2GiB
			}
		}
		model vip {
			engine sim
			class critical
			owner acme/research
			min 0
			resources {
				memory 2GiB
			}
		}
		model std2 {
			engine sim
			min 0
			resources {
				memory 2GiB
			}
		}`, "")
	g.readyReplicas("bulk", 1)
	var nodeSt llmapi.NodeStatus
	g.adminGet("/llm/node", &nodeSt)
	if nodeSt.Capacity.Memory != 4<<30 || nodeSt.Used.Memory != 3<<30 {
		t.Fatalf("node: %+v", nodeSt)
	}

	// std (standard) needs 2 GiB with 1 free: bulk (opportunistic) gives way.
	chatOnce(t, g, "std")
	waitFor(t, 10*time.Second, "bulk to stop and wait", func() bool {
		st := g.models()["bulk"]
		return len(st.Replicas) == 0 && st.State == "waiting"
	})
	st := g.models()["bulk"]
	if st.State != "waiting" || !strings.Contains(st.Reason, "waiting for a node with room for it") {
		t.Errorf("bulk: %q %q", st.State, st.Reason)
	}
	_, apiErr := chatErr(g.client(), "bulk")
	if apiErr == nil || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "waiting for a node with room for it") {
		t.Errorf("a request for bulk: %+v", apiErr)
	}

	// vip (critical) fits in what is left.
	chatOnce(t, g, "vip")
	if len(g.models()["std"].Replicas) != 1 {
		t.Error("vip stopped std although it fit")
	}
	// std2 (standard) finds no room: vip is critical, std is its equal.
	_, apiErr = chatErr(g.client(), "std2")
	if apiErr == nil || apiErr.StatusCode != 503 || !strings.Contains(apiErr.Message, "a replica needs 2.0 GiB memory; the node has 0 B memory free") {
		t.Errorf("a request for std2: %+v", apiErr)
	}
	if len(g.models()["vip"].Replicas) != 1 || len(g.models()["std"].Replicas) != 1 {
		t.Error("std2 stopped a replica of its class or above")
	}
	vip := g.models()["vip"]
	if vip.Class != "critical" || vip.Owner != "acme/research" || vip.Resources == nil || vip.Resources.Memory != 2<<30 {
		t.Errorf("vip's status: %+v", vip)
	}
	var after llmapi.NodeStatus
	g.adminGet("/llm/node", &after)
	if after.Used.Memory != 4<<30 || after.Free.Memory != 0 {
		t.Errorf("node after: %+v", after)
	}
}

// With pin_cores, each replica of a model that needs cores runs on cores
// of its own, its threads and children too; other replicas run anywhere.
func TestPinCores(t *testing.T) {
	mine, err := engine.CPUsOf(0)
	if err != nil || len(mine) < 2 {
		t.Skip("needs two cores to pin replicas apart")
	}
	g := startGateway(t, `
		node {
			cores 2
			pin_cores
		}
		model one {
			engine sim
			resources {
				cores 1
			}
		}
		model two {
			engine sim
			resources {
				cores 1
			}
		}
		model free {
			engine sim
		}`, "")
	for _, m := range []string{"one", "two", "free"} {
		g.readyReplicas(m, 1)
	}
	st := g.models()
	got := map[int]string{}
	for _, m := range []string{"one", "two"} {
		r := st[m].Replicas[0]
		if len(r.CPUs) != 1 {
			t.Fatalf("%s: pinned to %v, want one core", m, r.CPUs)
		}
		if other, ok := got[r.CPUs[0]]; ok {
			t.Fatalf("%s and %s share core %d", m, other, r.CPUs[0])
		}
		got[r.CPUs[0]] = m
		if err := checkAffinity(r.PID, r.CPUs); err != nil {
			t.Errorf("%s: %v", m, err)
		}
		chatOnce(t, g, m) // a pinned replica serves
	}
	r := st["free"].Replicas[0]
	if len(r.CPUs) != 0 {
		t.Errorf("free (needs no cores) pinned to %v", r.CPUs)
	}
	if err := checkAffinity(r.PID, mine); err != nil {
		t.Errorf("free: %v", err)
	}
}

// checkAffinity checks that every thread of process pid may run on
// exactly cpus.
func checkAffinity(pid int64, cpus []int) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return err
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		have, err := engine.CPUsOf(tid)
		if err != nil {
			continue // the thread has gone
		}
		if !slices.Equal(have, cpus) {
			return fmt.Errorf("thread %d of process %d may run on %v, want %v", tid, pid, have, cpus)
		}
	}
	return nil
}
