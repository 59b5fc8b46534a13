package engine

import "golang.org/x/sys/unix"

// CPUsOf lists, in order, the cores a thread or process may run on (pid
// 0: the calling thread), as ReplicaSpec.CPUs names them.
func CPUsOf(pid int) ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil, err
	}
	out := make([]int, 0, set.Count())
	for c := 0; len(out) < cap(out); c++ {
		if set.IsSet(c) {
			out = append(out, c)
		}
	}
	return out, nil
}
