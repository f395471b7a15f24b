//go:build unix

package sandbox

import (
	"os/exec"
	"syscall"
)

// NewSession makes cmd start in a session of its own: the leader of a new
// process group (pgid == pid, so the caller can signal -pid) without a
// controlling terminal. Every program troupe starts begins like this,
// sandboxed or not (runs, command tools, downstream stdio servers, the
// Codex app-server, rg): a program that kept the terminal troupe runs in
// could read from it or push keystrokes into it (TIOCSTI), which the
// user's shell would then run outside any sandbox. It replaces
// cmd.SysProcAttr.
func NewSession(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}
