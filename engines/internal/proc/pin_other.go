//go:build !linux

package proc

import (
	"fmt"
	"os/exec"
	"runtime"
)

// startOn starts cmd; pinning it to cores works on Linux only.
func startOn(cmd *exec.Cmd, cpus []int) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	return fmt.Errorf("pinning an engine server to CPUs %v works on Linux only, not %s; leave the model's cores unpinned", cpus, runtime.GOOS)
}
