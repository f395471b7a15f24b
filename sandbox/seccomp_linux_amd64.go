package sandbox

import "golang.org/x/sys/unix"

// seccompArch is the AUDIT_ARCH_ value of native syscalls; seccompX32 says
// the architecture also has x32 syscall numbers to refuse.
const (
	seccompArch = unix.AUDIT_ARCH_X86_64
	seccompX32  = true
)

// legacyMetadataSyscalls are x86-64's path forms of metadata changes that
// arm64 never had.
var legacyMetadataSyscalls = []uintptr{
	unix.SYS_CHMOD, unix.SYS_CHOWN, unix.SYS_LCHOWN,
	unix.SYS_UTIME, unix.SYS_UTIMES, unix.SYS_FUTIMESAT,
}
