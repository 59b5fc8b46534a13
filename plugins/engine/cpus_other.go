//go:build !linux

package engine

import (
	"fmt"
	"runtime"
)

// CPUsOf lists the cores a process may run on: known on Linux only.
func CPUsOf(pid int) ([]int, error) {
	return nil, fmt.Errorf("the cores of process %d: known on Linux only, not %s", pid, runtime.GOOS)
}
