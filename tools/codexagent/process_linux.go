package codexagent

import (
	"errors"

	"golang.org/x/sys/unix"
)

// supported says whether this system can run Codex the way this package
// does.
const supported = true

// awaitExit blocks until the process pid has exited, without reaping it:
// waitid with WNOWAIT leaves it a zombie, which keeps its pid, and so its
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
