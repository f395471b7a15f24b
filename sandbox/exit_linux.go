package sandbox

import (
	"errors"

	"golang.org/x/sys/unix"
)

// AwaitExit blocks until the process pid (a child of the caller) has
// exited, without reaping it: waitid with WNOWAIT leaves it a zombie,
// which keeps its pid, and so its process group id, from being reused
// until exec.Cmd.Wait reaps it. Until then a signal sent to the group
// cannot reach an unrelated process. Runners of process groups (command
// tools, shell.exec, the codex tools) wait with it before their last
// group kill.
func AwaitExit(pid int) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}
