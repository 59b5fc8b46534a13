package llmmcp

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// A local server runs in a process group of its own, so that stopping it
// stops what it started too, and is killed by the kernel when llmgw dies
// (Pdeathsig, on Linux), even killed in a way that runs no cleanup. This is what
// the engines' servers get from their plugin, which in turn gets it from
// llmgw.

// groupAttr makes cmd lead its own process group and die with llmgw.
func groupAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = groupProcAttr()
}

// stopGroup stops the process group that pid leads: it waits up to grace
// for the leader to exit by itself (its stdin was closed), then sends
// SIGTERM to the group, waits up to grace again, and kills the group.
func stopGroup(pid int, grace time.Duration) {
	if pid <= 0 {
		return
	}
	if waitExit(pid, grace) {
		_ = syscall.Kill(-pid, syscall.SIGKILL) // what it left behind
		return
	}
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	waitExit(pid, grace)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
}

// waitExit waits up to d for a process to exit; true when it has.
func waitExit(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !running(pid) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running reports whether a process lives: it exists and is not a zombie
// waiting to be reaped.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z' && b[i+2] != 'X'
	}
	return true
}
