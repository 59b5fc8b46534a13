package host

import "syscall"

// pluginProcAttr: SIGTERM when llmgw dies: the plugin then stops its
// engine servers, which outlive the plugin itself (so that a plugin crash
// cuts no request) but not the gateway.
func pluginProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
