package sandbox

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is classic BPF written by hand: the whole policy is a
// dozen comparisons, so a pure-Go assembler of our own keeps the binary
// static (no cgo, no libseccomp) and the policy readable in one place.
//
// What it does, in order:
//   - a syscall made with another architecture's convention (int 0x80 from
//     an x86-64 process, or x32 numbers) could name a different syscall
//     than the numbers below, so foreign-arch calls kill the process and
//     x32 calls fail with EPERM;
//   - ptrace and process_vm_readv/writev (reading or steering other
//     processes of the same uid), io_uring (it performs socket and file
//     operations without passing through the syscall filter), the kernel
//     keyring (root's keys are visible to any uid-0 process) and
//     personality changes other than a query or PER_LINUX (turning ASLR
//     off) fail with EPERM;
//   - when the network is off, socket and socketpair fail with EPERM unless
//     the domain is AF_UNIX. This is what turns UDP, raw sockets and every
//     other family off on kernels whose Landlock (ABI < 10) only knows TCP;
//   - ioctl TIOCSTI (push bytes into a terminal's input, as if typed) and
//     TIOCLINUX (its console twin) fail with EPERM: a run has no
//     controlling terminal (every program troupe starts begins a new
//     session), and this closes the door for a terminal fd it got anyway;
//   - with denyMetadata (no read-only mount view could be made: see
//     mounts_linux.go), every chmod, chown, utimes and xattr change fails
//     with EPERM, inside the workspace too, since a filter cannot tell
//     where a path leads;
//   - unless user namespaces are allowed (Policy.AllowUserNamespaces),
//     unshare and clone whose flags ask for CLONE_NEWUSER fail with EPERM,
//     and clone3 fails with ENOSYS: its flags are in memory a filter cannot
//     read, and glibc, musl and Go fall back to clone when the kernel
//     answers that it has no clone3. A user namespace would hand the run
//     every capability over new namespaces of its own (mounts, netfilter,
//     ...), kernel attack surface no tool needs.

// seccomp_data offsets (struct seccomp_data in linux/seccomp.h): nr, arch,
// instruction pointer, then six 64-bit arguments. Arguments are compared
// in their low 32 bits, which is all an int parameter uses (little-endian
// on every architecture we support).
const (
	offNr         = 0
	offArch       = 4
	offArg0Low    = 16
	offArg1Low    = 24
	x32SyscallBit = 0x40000000
)

// filterOptions are the settings that change the filter.
type filterOptions struct {
	network      bool // sockets of every family
	denyMetadata bool // chmod, chown, utimes and xattr changes refused
	userNS       bool // user namespaces may be created
}

// bpf labels, resolved to jump offsets by assemble.
const (
	lblNone = iota
	lblAllow
	lblDeny
	lblKill
	lblPersonality
	lblSocket
	lblIoctl
	lblCloneFlags
	lblNoSys
)

// Terminal ioctls no run may make (asm-generic/ioctls.h; the same numbers
// on x86-64 and arm64).
const (
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C
)

type bpfIns struct {
	ins    unix.SockFilter
	label  int // this instruction starts the block with this label
	jt, jf int // labels to jump to (lblNone: fall through)
}

func stmt(code uint16, k uint32) bpfIns { return bpfIns{ins: unix.SockFilter{Code: code, K: k}} }

func jeq(k uint32, jt, jf int) bpfIns {
	return bpfIns{ins: unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k}, jt: jt, jf: jf}
}

func labelled(label int, i bpfIns) bpfIns {
	i.label = label
	return i
}

// seccompFilter builds the filter for arch (an AUDIT_ARCH_ value) and
// the run's settings.
func seccompFilter(arch uint32, x32 bool, o filterOptions) ([]unix.SockFilter, error) {
	ld := func(off uint32) bpfIns { return stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, off) }
	ret := func(v uint32) bpfIns { return stmt(unix.BPF_RET|unix.BPF_K, v) }

	p := []bpfIns{
		ld(offArch),
		jeq(arch, lblNone, lblKill),
		ld(offNr),
	}
	if x32 {
		p = append(p, bpfIns{ins: unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: x32SyscallBit}, jt: lblDeny})
	}
	denied := deniedSyscalls()
	if o.denyMetadata {
		denied = append(denied, metadataSyscalls()...)
	}
	for _, nr := range denied {
		p = append(p, jeq(uint32(nr), lblDeny, lblNone))
	}
	p = append(p,
		jeq(unix.SYS_PERSONALITY, lblPersonality, lblNone),
		jeq(unix.SYS_IOCTL, lblIoctl, lblNone),
	)
	if !o.network {
		p = append(p,
			jeq(unix.SYS_SOCKET, lblSocket, lblNone),
			jeq(unix.SYS_SOCKETPAIR, lblSocket, lblNone),
		)
	}
	if !o.userNS {
		// clone's and unshare's flags are their first argument on both
		// architectures (s390x, which swaps clone's, has no filter).
		p = append(p,
			jeq(unix.SYS_UNSHARE, lblCloneFlags, lblNone),
			jeq(unix.SYS_CLONE, lblCloneFlags, lblNone),
			jeq(unix.SYS_CLONE3, lblNoSys, lblNone),
		)
	}
	p = append(p,
		ret(unix.SECCOMP_RET_ALLOW),
		labelled(lblCloneFlags, ld(offArg0Low)),
		bpfIns{ins: unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, K: unix.CLONE_NEWUSER}, jt: lblDeny, jf: lblAllow},
		labelled(lblNoSys, ret(unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))),
		// personality(0xffffffff) only queries; PER_LINUX (0) is the default.
		labelled(lblPersonality, ld(offArg0Low)),
		jeq(0, lblAllow, lblNone),
		jeq(0xffffffff, lblAllow, lblDeny),
		labelled(lblSocket, ld(offArg0Low)),
		jeq(unix.AF_UNIX, lblAllow, lblDeny),
		// ioctl's request is an unsigned int: its low 32 bits are all of it.
		labelled(lblIoctl, ld(offArg1Low)),
		jeq(ioctlTIOCSTI, lblDeny, lblNone),
		jeq(ioctlTIOCLINUX, lblDeny, lblAllow),
		labelled(lblAllow, ret(unix.SECCOMP_RET_ALLOW)),
		labelled(lblDeny, ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM))),
		labelled(lblKill, ret(unix.SECCOMP_RET_KILL_PROCESS)),
	)
	return assemble(p)
}

// assemble turns label references into BPF's relative jump offsets.
func assemble(p []bpfIns) ([]unix.SockFilter, error) {
	at := map[int]int{}
	for i, in := range p {
		if in.label != lblNone {
			at[in.label] = i
		}
	}
	out := make([]unix.SockFilter, len(p))
	for i, in := range p {
		out[i] = in.ins
		for _, j := range []struct {
			label int
			dst   *uint8
		}{{in.jt, &out[i].Jt}, {in.jf, &out[i].Jf}} {
			if j.label == lblNone {
				continue
			}
			target, ok := at[j.label]
			off := target - i - 1
			if !ok || off < 0 || off > 255 {
				return nil, fmt.Errorf("seccomp filter: bad jump from %d to label %d", i, j.label)
			}
			*j.dst = uint8(off)
		}
	}
	return out, nil
}

// deniedSyscalls always fail with EPERM under the default profile.
func deniedSyscalls() []uintptr {
	return []uintptr{
		unix.SYS_PTRACE,
		unix.SYS_PROCESS_VM_READV,
		unix.SYS_PROCESS_VM_WRITEV,
		unix.SYS_IO_URING_SETUP,
		unix.SYS_IO_URING_ENTER,
		unix.SYS_IO_URING_REGISTER,
		unix.SYS_KEYCTL,
		unix.SYS_ADD_KEY,
		unix.SYS_REQUEST_KEY,
	}
}

// metadataSyscalls change a file's mode, owner, times or extended
// attributes: refused with denyMetadata. legacyMetadataSyscalls are the
// architecture's older forms (chmod, chown, utime, ... on x86-64).
func metadataSyscalls() []uintptr {
	return append([]uintptr{
		unix.SYS_FCHMOD,
		unix.SYS_FCHMODAT,
		unix.SYS_FCHMODAT2,
		unix.SYS_FCHOWN,
		unix.SYS_FCHOWNAT,
		unix.SYS_UTIMENSAT,
		unix.SYS_SETXATTR,
		unix.SYS_LSETXATTR,
		unix.SYS_FSETXATTR,
		unix.SYS_SETXATTRAT,
		unix.SYS_REMOVEXATTR,
		unix.SYS_LREMOVEXATTR,
		unix.SYS_FREMOVEXATTR,
		unix.SYS_REMOVEXATTRAT,
	}, legacyMetadataSyscalls...)
}

// installSeccomp loads the filter into every thread of the calling process
// (TSYNC), so whichever thread execs carries it. no_new_privs must be set.
func installSeccomp(o filterOptions) error {
	if seccompArch == 0 {
		return fmt.Errorf("seccomp: unsupported architecture")
	}
	filter, err := seccompFilter(seccompArch, seccompX32, o)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): %w", errno)
	}
	if r != 0 {
		return fmt.Errorf("seccomp(SET_MODE_FILTER): thread %d could not be synchronised", r)
	}
	return nil
}

// seccompAvailable reports whether filters with the actions we use can be
// installed here, without installing one.
func seccompAvailable() error {
	if seccompArch == 0 {
		return fmt.Errorf("architecture not supported by the filter")
	}
	for _, action := range []uint32{unix.SECCOMP_RET_ERRNO, unix.SECCOMP_RET_KILL_PROCESS, unix.SECCOMP_RET_ALLOW} {
		a := action
		_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&a)))
		if errno != 0 {
			return fmt.Errorf("seccomp action %#x: %w", action, errno)
		}
	}
	return nil
}
