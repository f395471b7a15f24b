//go:build unix && !linux

package sandbox

import (
	"os/exec"
	"syscall"
)

// setGroup makes cmd the leader of a new process group.
func setGroup(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return nil
}

// killGroup sends SIGKILL to the process group pgid.
func killGroup(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }
