package sandbox

import "golang.org/x/sys/unix"

// seccompArch is the AUDIT_ARCH_ value of native syscalls; seccompX32 says
// the architecture also has x32 syscall numbers to refuse.
const (
	seccompArch = unix.AUDIT_ARCH_X86_64
	seccompX32  = true
)
