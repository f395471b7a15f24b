//go:build linux && !amd64 && !arm64

package sandbox

// seccompArch 0 means the filter has not been written for this
// architecture (syscall numbers and the audit arch differ): Isolation says
// "no seccomp" and the default profile is unenforceable.
const (
	seccompArch = 0
	seccompX32  = false
)

// legacyMetadataSyscalls: no filter is written for this architecture.
var legacyMetadataSyscalls []uintptr
