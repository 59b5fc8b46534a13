//go:build !linux

package host

import "syscall"

// pluginProcAttr: there is no parent-death signal here, so a plugin
// outlives an llmgw that is killed; one stopped in order stops its plugins.
func pluginProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
