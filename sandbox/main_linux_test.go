package sandbox

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// probeArg makes the test binary a probe program: the sandboxed target of
// the escape tests that need more than a shell (sockets, syscalls).
const probeArg = "__sbxprobe"

// TestMain dispatches the two roles this test binary plays besides running
// tests: the sandbox helper (Start re-executes /proc/self/exe, which is the
// test binary) and the probe program.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case HelperArg:
			os.Exit(HelperMain(os.Args[1:]))
		case probeArg:
			os.Exit(runProbe(os.Args[2:]))
		}
	}
	goleak.VerifyTestMain(m)
}

// runProbe performs one action and says how it went on stdout: "ok ..." and
// exit 0, or "denied <errno name>: ..." / "error: ..." and exit 1.
func runProbe(args []string) int {
	if len(args) == 0 {
		fmt.Println("error: no action")
		return 2
	}
	result := func(err error) int {
		if err == nil {
			fmt.Println("ok")
			return 0
		}
		fmt.Println("denied:", err)
		return 1
	}
	switch action := args[0]; action {
	case "tcp":
		conn, err := net.DialTimeout("tcp", args[1], 3*time.Second)
		if err == nil {
			_, err = conn.Write([]byte("escaped"))
			conn.Close()
		}
		return result(err)
	case "udp":
		conn, err := net.Dial("udp", args[1])
		if err == nil {
			_, err = conn.Write([]byte("escaped"))
			conn.Close()
		}
		return result(err)
	case "unix-socket":
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err == nil {
			unix.Close(fd)
		}
		return result(err)
	case "ptrace":
		// PEEKDATA on a process we do not trace: the kernel answers ESRCH,
		// the seccomp filter EPERM before the kernel is asked.
		_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_PEEKDATA, uintptr(os.Getppid()), 0, 0, 0, 0)
		if errno == unix.EPERM {
			return result(errno)
		}
		fmt.Println("ok (kernel answered:", errno.Error()+")")
		return 0
	case "io_uring":
		var params [120]byte
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)
		if errno == 0 {
			unix.Close(int(fd))
			return result(nil)
		}
		if errno == unix.EPERM {
			return result(errno)
		}
		fmt.Println("ok (kernel answered:", errno.Error()+")")
		return 0
	case "keyring":
		_, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_USER_KEYRING, false)
		return result(err)
	case "personality":
		const addrNoRandomize = 0x0040000
		_, _, errno := unix.Syscall(unix.SYS_PERSONALITY, addrNoRandomize, 0, 0)
		if errno != 0 {
			return result(errno)
		}
		return result(nil)
	case "setxattr":
		return result(unix.Setxattr(args[1], "user.troupe", []byte("x"), 0))
	case "tiocsti":
		// Push a command into the terminal's input, as if typed: the
		// keystroke injection a run must never manage.
		f, err := os.OpenFile(args[1], os.O_RDWR, 0)
		if err != nil {
			return result(err)
		}
		defer f.Close()
		for _, c := range []byte(args[2]) {
			b := c
			if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.TIOCSTI, uintptr(unsafe.Pointer(&b))); errno != 0 {
				return result(errno)
			}
		}
		return result(nil)
	case "signal-server":
		// The server's pid, from its environment: in a PID namespace the
		// target's parent is the run's own init.
		pid, err := strconv.Atoi(os.Getenv("TROUPE_TEST_SERVER_PID"))
		if err != nil {
			return result(err)
		}
		return result(unix.Kill(pid, 0))
	case "caps":
		data, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return result(err)
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if strings.HasPrefix(line, "Cap") || strings.HasPrefix(line, "NoNewPrivs") || strings.HasPrefix(line, "Seccomp:") {
				fmt.Println(strings.Join(strings.Fields(line), " "))
			}
		}
		return 0
	case "clone-newuser":
		// What unshare(1) does with clone instead of unshare(2): Go's
		// fork uses clone, with the namespace flags in its first argument.
		cmd := exec.Command("/bin/true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		return result(cmd.Run())
	case "clone3":
		// A bad size: the kernel answers EINVAL, a filter that refuses
		// clone3 ENOSYS before the kernel looks.
		_, _, errno := unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
		fmt.Println("clone3:", unix.ErrnoName(errno))
		return 0
	case "exec":
		out, err := exec.Command(args[1], args[2:]...).Output()
		fmt.Print(string(out))
		return result(err)
	case "environ":
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", os.Getppid()))
		if err != nil {
			return result(err)
		}
		if strings.Contains(string(data), args[1]) {
			fmt.Println("ok: secret read")
			return 0
		}
		fmt.Println("error: environ read, secret not in it")
		return 2
	}
	fmt.Println("error: unknown action", args[0])
	return 2
}
