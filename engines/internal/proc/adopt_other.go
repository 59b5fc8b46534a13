//go:build !linux

package proc

import (
	"time"

	"golang.org/x/sys/unix"
)

// watchExit watches pid, a process that is not this one's child, by
// signal 0 once a second (there is no pidfd here). wait(false) returns
// once pid has exited; wait(true) gives the watch up.
func watchExit(pid int) (wait func(giveUp bool), err error) {
	if err := unix.Kill(pid, 0); err != nil {
		return nil, err
	}
	return func(giveUp bool) {
		for !giveUp && unix.Kill(pid, 0) == nil {
			time.Sleep(time.Second)
		}
	}, nil
}
