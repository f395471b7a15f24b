package sandbox

import "golang.org/x/sys/unix"

// seccompArch is the AUDIT_ARCH_ value of native syscalls; seccompX32 says
// the architecture also has x32 syscall numbers to refuse.
const (
	seccompArch = unix.AUDIT_ARCH_AARCH64
	seccompX32  = false
)

// legacyMetadataSyscalls: arm64 has only the *at forms.
var legacyMetadataSyscalls []uintptr
