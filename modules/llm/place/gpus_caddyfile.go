package place

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// ParseGPUDevices reads the node block's gpu_devices <i,j,…> (or <i> <j>
// …): the GPU devices replicas are given (see SetGPUDevices).
func ParseGPUDevices(d *caddyfile.Dispenser, dst *[]int) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	devs, ok := ParseInts(strings.Join(args, ","))
	if !ok || len(devs) == 0 {
		return d.Errf("gpu_devices %q: give GPU indexes, comma-separated, such as 0,2,3", strings.Join(args, " "))
	}
	if _, err := GPUDevices(devs, "", 0); err != nil {
		return d.Err(err.Error())
	}
	*dst = devs
	return nil
}
