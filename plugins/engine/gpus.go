package engine

import (
	"strconv"
	"strings"
)

// VisibleDevicesEnv is the environment that limits an engine server to
// the GPU devices of ReplicaSpec.GPUDevices: CUDA_VISIBLE_DEVICES for
// NVIDIA's CUDA and HIP_VISIBLE_DEVICES for AMD's ROCm, both the same
// indexes. ROCR_VISIBLE_DEVICES is left alone: ROCm applies it before
// HIP_VISIBLE_DEVICES, which would then count within what it left, so the
// same indexes in both would pick other devices. Nil for no devices.
func VisibleDevicesEnv(devices []int) []string {
	if len(devices) == 0 {
		return nil
	}
	s := make([]string, len(devices))
	for i, d := range devices {
		s[i] = strconv.Itoa(d)
	}
	list := strings.Join(s, ",")
	return []string{"CUDA_VISIBLE_DEVICES=" + list, "HIP_VISIBLE_DEVICES=" + list}
}
