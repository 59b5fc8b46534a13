package engine

import (
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCPUsOf(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all, err := CPUsOf(0)
	if err != nil || len(all) == 0 {
		t.Fatalf("CPUsOf(0) = %v, %v", all, err)
	}
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	last := all[len(all)-1]
	one.Set(last)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	defer unix.SchedSetaffinity(0, &old)
	if got, err := CPUsOf(0); err != nil || !slices.Equal(got, []int{last}) {
		t.Fatalf("pinned to %d: CPUsOf(0) = %v, %v", last, got, err)
	}
}
