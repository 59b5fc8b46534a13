package proc

import "golang.org/x/sys/unix"

// watchExit opens a pidfd on pid, a process that is not this one's child.
// wait(false) returns once pid has exited; wait(true) gives the watch up.
func watchExit(pid int) (wait func(giveUp bool), err error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	return func(giveUp bool) {
		defer func() { _ = unix.Close(fd) }()
		if giveUp {
			return
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				return
			}
		}
	}, nil
}
