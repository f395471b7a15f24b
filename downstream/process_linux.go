package downstream

import (
	"errors"

	"golang.org/x/sys/unix"
)

// awaitExit blocks until process pid has exited, without reaping it:
// waitid with WNOWAIT leaves a zombie, which keeps the pid, and so the
// process group id, from being reused until exec.Cmd.Wait reaps it.
func awaitExit(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
