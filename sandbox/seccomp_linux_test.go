package sandbox

import (
	"encoding/binary"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// TestSeccompFilterLogic runs the filter in x/net/bpf's interpreter over
// hand-made seccomp_data, so every branch is checked without a kernel:
// foreign architectures, x32 numbers, the always-denied calls, the
// personality and socket argument checks, and the network switch.
func TestSeccompFilterLogic(t *testing.T) {
	if seccompArch == 0 {
		t.Skip("no filter for this architecture")
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		kill  = unix.SECCOMP_RET_KILL_PROCESS
	)
	type call struct {
		name string
		arch uint32
		nr   uint32
		arg0 uint32
		arg1 uint32
	}
	native := func(name string, nr uintptr, arg0 uint32) call {
		return call{name, seccompArch, uint32(nr), arg0, 0}
	}
	ioctl := func(name string, request uint32) call {
		return call{name, seccompArch, unix.SYS_IOCTL, 0, request}
	}
	cases := []struct {
		c           call
		offline     uint32 // network off
		withNetwork uint32 // network allowed
	}{
		{native("read", unix.SYS_READ, 0), allow, allow},
		{native("execve", unix.SYS_EXECVE, 0), allow, allow},
		{native("socket(AF_UNIX)", unix.SYS_SOCKET, unix.AF_UNIX), allow, allow},
		{native("socket(AF_INET)", unix.SYS_SOCKET, unix.AF_INET), eperm, allow},
		{native("socket(AF_INET6)", unix.SYS_SOCKET, unix.AF_INET6), eperm, allow},
		{native("socket(AF_NETLINK)", unix.SYS_SOCKET, unix.AF_NETLINK), eperm, allow},
		{native("socket(AF_PACKET)", unix.SYS_SOCKET, unix.AF_PACKET), eperm, allow},
		{native("socketpair(AF_UNIX)", unix.SYS_SOCKETPAIR, unix.AF_UNIX), allow, allow},
		{native("socketpair(AF_INET)", unix.SYS_SOCKETPAIR, unix.AF_INET), eperm, allow},
		{native("ptrace", unix.SYS_PTRACE, 0), eperm, eperm},
		{native("process_vm_readv", unix.SYS_PROCESS_VM_READV, 0), eperm, eperm},
		{native("process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, 0), eperm, eperm},
		{native("io_uring_setup", unix.SYS_IO_URING_SETUP, 0), eperm, eperm},
		{native("io_uring_enter", unix.SYS_IO_URING_ENTER, 0), eperm, eperm},
		{native("io_uring_register", unix.SYS_IO_URING_REGISTER, 0), eperm, eperm},
		{native("keyctl", unix.SYS_KEYCTL, 0), eperm, eperm},
		{native("add_key", unix.SYS_ADD_KEY, 0), eperm, eperm},
		{native("request_key", unix.SYS_REQUEST_KEY, 0), eperm, eperm},
		{native("personality(query)", unix.SYS_PERSONALITY, 0xffffffff), allow, allow},
		{native("personality(PER_LINUX)", unix.SYS_PERSONALITY, 0), allow, allow},
		{native("personality(ADDR_NO_RANDOMIZE)", unix.SYS_PERSONALITY, 0x0040000), eperm, eperm},
		{call{"foreign arch", unix.AUDIT_ARCH_I386, 0, 0, 0}, kill, kill},
		{ioctl("ioctl(TIOCSTI)", unix.TIOCSTI), eperm, eperm},
		{ioctl("ioctl(TIOCLINUX)", unix.TIOCLINUX), eperm, eperm},
		{ioctl("ioctl(TCGETS)", unix.TCGETS), allow, allow},
		{ioctl("ioctl(TIOCGWINSZ)", unix.TIOCGWINSZ), allow, allow},
		{native("fchmodat", unix.SYS_FCHMODAT, 0), allow, allow},
	}
	if seccompX32 {
		cases = append(cases, struct {
			c                    call
			offline, withNetwork uint32
		}{native("x32 socket", x32SyscallBit|unix.SYS_SOCKET, unix.AF_INET), eperm, eperm})
	}
	for _, network := range []bool{false, true} {
		vm := filterVM(t, network, false)
		for _, c := range cases {
			// seccomp_data with each 32-bit word where the kernel puts it;
			// the VM loads big-endian, so the words are written that way.
			data := make([]byte, 64)
			binary.BigEndian.PutUint32(data[offNr:], c.c.nr)
			binary.BigEndian.PutUint32(data[offArch:], c.c.arch)
			binary.BigEndian.PutUint32(data[offArg0Low:], c.c.arg0)
			binary.BigEndian.PutUint32(data[offArg1Low:], c.c.arg1)
			got, err := vm.Run(data)
			if err != nil {
				t.Fatal(err)
			}
			want := c.offline
			if network {
				want = c.withNetwork
			}
			if uint32(got) != want {
				t.Errorf("network=%v %s: got %#x, want %#x", network, c.c.name, uint32(got), want)
			}
		}
	}
}

// TestSeccompDenyMetadata checks the fallback for kernels without the
// mount view: every call that changes a file's mode, owner, times or
// extended attributes is refused, and nothing else is.
func TestSeccompDenyMetadata(t *testing.T) {
	if seccompArch == 0 {
		t.Skip("no filter for this architecture")
	}
	run := func(deny bool, nr uintptr) uint32 {
		vm := filterVM(t, false, deny)
		data := make([]byte, 64)
		binary.BigEndian.PutUint32(data[offNr:], uint32(nr))
		binary.BigEndian.PutUint32(data[offArch:], seccompArch)
		got, err := vm.Run(data)
		if err != nil {
			t.Fatal(err)
		}
		return uint32(got)
	}
	eperm := unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	for _, nr := range metadataSyscalls() {
		if got := run(true, nr); got != eperm {
			t.Errorf("syscall %d with denyMetadata: %#x, want EPERM", nr, got)
		}
		if got := run(false, nr); got != unix.SECCOMP_RET_ALLOW {
			t.Errorf("syscall %d without denyMetadata: %#x, want allow", nr, got)
		}
	}
	for _, nr := range []uintptr{unix.SYS_OPENAT, unix.SYS_WRITE, unix.SYS_FSTAT, unix.SYS_RENAMEAT} {
		if got := run(true, nr); got != unix.SECCOMP_RET_ALLOW {
			t.Errorf("syscall %d with denyMetadata: %#x, want allow", nr, got)
		}
	}
}

// filterVM loads the filter for these settings into x/net/bpf's
// interpreter.
func filterVM(t *testing.T, network, denyMetadata bool) *bpf.VM {
	t.Helper()
	filter, err := seccompFilter(seccompArch, seccompX32, filterOptions{network: network, denyMetadata: denyMetadata})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]bpf.RawInstruction, len(filter))
	for i, f := range filter {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("filter does not disassemble: %v", raw)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("filter rejected by the BPF VM: %v", err)
	}
	return vm
}
