package llm

// GPUs as devices: a replica of a model that needs N GPUs (resources
// { gpus N }) holds N of its node's devices that no other replica on the
// node holds, from when its start begins until it stops; its engine runs
// with CUDA_VISIBLE_DEVICES set to them. The ledger (place.go) counts
// GPUs as it counts memory, so a replica fits exactly when N devices are
// free; this file picks which.

import (
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/llmgw/llmgw/modules/llm/place"
)

// parseGPUDevices reads gpu_devices <i,j,…> (or <i> <j> …).
func parseGPUDevices(d *caddyfile.Dispenser, dst *[]int) error {
	args := d.RemainingArgs()
	if len(args) == 0 {
		return d.ArgErr()
	}
	devs, ok := place.ParseInts(strings.Join(args, ","))
	if !ok || len(devs) == 0 {
		return d.Errf("gpu_devices %q: give GPU indexes, comma-separated, such as 0,2,3", strings.Join(args, " "))
	}
	if _, err := place.GPUDevices(devs, "", 0); err != nil {
		return d.Err(err.Error())
	}
	*dst = devs
	return nil
}
