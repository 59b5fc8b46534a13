package proc

import (
	"fmt"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/llmgw/llmgw/plugins/engine"
)

// startOn starts cmd pinned to cpus. A child takes the CPU mask of the
// thread that forks it, and every thread and process it starts takes it in
// turn, so the mask is set on this goroutine's thread for the fork and put
// back after.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return err
	}
	for _, c := range cpus {
		set.Set(c)
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		mine, _ := engine.CPUsOf(0)
		return fmt.Errorf("pinning to CPUs %v (this process may use %v): %w", cpus, mine, err)
	}
	err := cmd.Start()
	_ = unix.SchedSetaffinity(0, &old)
	return err
}
