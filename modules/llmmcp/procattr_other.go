//go:build !linux

package llmmcp

import "syscall"

// groupProcAttr: no parent-death signal here; the group is stopped when
// llmgw stops in order.
func groupProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
