package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// helperConfig is what the server tells the helper over the config pipe,
// in the form of wire_linux.go. The target's environment travels here,
// not in the helper's own environment: the helper runs with an empty one,
// so LD_PRELOAD, GODEBUG and the like chosen for the target cannot act on
// the helper before the sandbox is in place.
type helperConfig struct {
	Path      string
	Args      []string
	Env       []string
	Workspace string
	TempDir   string
	// Writable is Policy.Writable: further directories Landlock lets the
	// run write.
	Writable []string
	Network  bool
	Limits   Limits
	// LandlockABI is the ABI the server probed; the helper refuses to run
	// the target if it finds less (fail closed). 0: no Landlock.
	LandlockABI int
	// NProc, when > 0, is RLIMIT_NPROC, set just before exec: the
	// fork-bomb guard of a non-root server without a pids cgroup (the
	// helper then runs in a fresh user namespace, where the count is per
	// run).
	NProc int
	// FirstPrivateFD is the first fd the target must not inherit: 0-2 and
	// the caller's ExtraFiles are below it. Anything the server inherited
	// from its own parent without close-on-exec would otherwise reach the
	// target.
	FirstPrivateFD int
	// Cgroups is how many cgroups (memory, pids) the run joins: the
	// server sends as many fds of their cgroup.procs with the config
	// (receiveConfig), and the helper joins them just before exec.
	Cgroups int
	// CgroupFDs are those fds, as the helper received them; not sent.
	CgroupFDs []int
	// NetNS and IPCNS, when not 0, are inherited fds of a network and an
	// IPC namespace made for this run ahead of time (nspool_linux.go);
	// the helper joins them first.
	NetNS int
	IPCNS int
	// Mounts, when set, is the mount view the helper makes first, in the
	// mount namespace it was started in (mounts_linux.go).
	Mounts *mountView
	// DenyMetadata makes the seccomp filter refuse chmod, chown, utimes
	// and xattr changes: the fallback when no mount view can be made.
	DenyMetadata bool
	// Init says the helper is the first process of a new PID namespace:
	// it stays as the namespace's init and runs the target as its child,
	// so that everything the run started dies with it (initmode_linux.go).
	Init bool
	// ReadOnly is Policy.ReadOnlyWorkspace: Landlock allows reading the
	// workspace and Runtime, and writing nothing.
	ReadOnly bool
	// Runtime lists the files the target needs to start under ReadOnly:
	// the executable, its interpreter and its shared libraries.
	Runtime []string
	// UserNS is Policy.AllowUserNamespaces: the seccomp filter lets the
	// run create user namespaces, and Landlock restricts no filesystem
	// access (a domain that does refuses every mount, which a sandbox
	// inside the run needs); the mount view confines the filesystem
	// instead (nestedmode_linux.go).
	UserNS bool
	// Reaper says the helper is the first process of the run's PID
	// namespace (it was started in it): it runs the target as its child,
	// reaps orphans, and ends as the target did.
	Reaper bool
}

// helperStatus is the failure report the helper writes to the status pipe
// after the byte 'E'. A successful setup writes 'R' and then execs: the
// status pipe is close-on-exec, so the server reads 'R' and EOF.
type helperStatus struct {
	Stage string `json:"stage"`
	Errno int    `json:"errno,omitempty"`
	Msg   string `json:"msg"`
}

// Exit codes of a helper that failed.
const (
	exitSetup    = 125 // the sandbox could not be set up
	exitNoExec   = 126 // the target exists but could not be executed
	exitNotFound = 127 // the target does not exist
)

// HelperMain is the re-exec helper's entry point. cmd/troupe's main calls
// it as the first thing when os.Args[1] == HelperArg and exits with its
// result; args are os.Args[1:] (os.Args works too). The helper reads its
// configuration from the inherited fd named in args, applies, in order,
// rlimits, a capability drop (a root helper keeps no capabilities, so the
// target cannot use CAP_SYS_PTRACE or CAP_DAC_OVERRIDE), no_new_privs,
// Landlock, the seccomp filter, RLIMIT_NPROC and the cgroup join, and then
// execs the target. Any failure is reported over the status pipe and ends
// the helper with a non-zero code; it never returns after a successful
// exec.
func HelperMain(args []string) int {
	if len(args) > 0 && args[0] != HelperArg && len(args) > 1 && args[1] == HelperArg {
		args = args[1:]
	}
	if len(args) == 0 || args[0] != HelperArg {
		fmt.Fprintln(os.Stderr, "sandbox helper: missing", HelperArg)
		return exitSetup
	}
	args = args[1:]
	if len(args) >= 1 && args[0] == initArg {
		return initMain(args[1:])
	}
	if len(args) >= 1 && args[0] == "probe" {
		// New starts the helper like this, inside the namespaces it wants
		// to know about: getting here means they can be made ("probe
		// mounts pidns": and the mount view can be made in them and a PID
		// namespace unshared). This is the
		// helper's own process, whose stdout is the prober's pipe, never
		// the server's protocol stream.
		for _, what := range args[1:] {
			var err error
			switch what {
			case "mounts":
				err = probeMountView(procReadOnly)
			case "nested":
				err = probeMountView(procMount)
			case "nested-bwrap":
				err = probeMountView(procKeep)
			case "pidns":
				err = unix.Unshare(unix.CLONE_NEWPID)
			default:
				err = fmt.Errorf("unknown probe %q", what)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "sandbox helper: probe %s: %v\n", what, err)
				return exitSetup
			}
		}
		fmt.Println(HelperProtocol)
		return 0
	}
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "sandbox helper: want <config fd> <status fd>")
		return exitSetup
	}
	cfgFD, err1 := strconv.Atoi(args[0])
	statusFD, err2 := strconv.Atoi(args[1])
	if err1 != nil || err2 != nil || cfgFD < 3 || statusFD < 3 {
		fmt.Fprintln(os.Stderr, "sandbox helper: bad fd arguments")
		return exitSetup
	}
	// Capabilities, the parent-death signal and the thread that execs are
	// per thread: everything below happens on this one.
	runtime.LockOSThread()
	unix.CloseOnExec(cfgFD)
	unix.CloseOnExec(statusFD)
	h := helper{status: statusFD}
	return h.run(cfgFD)
}

type helper struct {
	status int
}

// fail reports a failed stage to the server and returns the exit code.
func (h helper) fail(stage string, err error, code int) int {
	st := helperStatus{Stage: stage, Msg: err.Error()}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		st.Errno = int(errno)
	}
	data, _ := json.Marshal(st)
	_, _ = unix.Write(h.status, append([]byte{'E'}, data...))
	return code
}

func (h helper) run(cfgFD int) int {
	data, fds, err := receiveConfig(cfgFD)
	unix.Close(cfgFD)
	if err != nil {
		return h.fail("config", err, exitSetup)
	}
	var cfg helperConfig
	if err := cfg.unmarshal(data); err != nil {
		return h.fail("config", fmt.Errorf("decode config: %w", err), exitSetup)
	}
	if len(fds) != cfg.Cgroups {
		return h.fail("config", fmt.Errorf("config came with %d fds, want %d", len(fds), cfg.Cgroups), exitSetup)
	}
	cfg.CgroupFDs = fds
	if err := closeOnExecFrom(cfg.FirstPrivateFD); err != nil {
		return h.fail("config", err, exitSetup)
	}
	if cfg.NetNS > 0 {
		// While the helper has CAP_SYS_ADMIN.
		if err := joinNamespaces(cfg.NetNS, cfg.IPCNS); err != nil {
			return h.fail("namespaces", err, exitSetup)
		}
	}
	if cfg.Mounts != nil {
		// First, while the helper still has its capabilities in the
		// namespace.
		if err := setupMountView(*cfg.Mounts); err != nil {
			return h.fail("mounts", err, exitSetup)
		}
	}
	if cfg.Init {
		// Also needs the capabilities: the helper's next child (init)
		// is the first process of a new PID namespace.
		if err := unix.Unshare(unix.CLONE_NEWPID); err != nil {
			return h.fail("pidns", fmt.Errorf("unshare(CLONE_NEWPID): %w", err), exitSetup)
		}
	}
	if err := setRlimits(cfg.Limits); err != nil {
		return h.fail("rlimit", err, exitSetup)
	}
	if err := dropCapabilities(); err != nil {
		return h.fail("capabilities", err, exitSetup)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return h.fail("capabilities", fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err), exitSetup)
	}
	if cfg.LandlockABI > 0 || cfg.ReadOnly { // a read-only run without Landlock fails here
		if err := applyLandlock(cfg); err != nil {
			return h.fail("landlock", err, exitSetup)
		}
	}
	if err := installSeccomp(filterOptions{network: cfg.Network, denyMetadata: cfg.DenyMetadata, userNS: cfg.UserNS}); err != nil {
		return h.fail("seccomp", err, exitSetup)
	}
	args := cfg.Args
	if len(args) == 0 {
		args = []string{cfg.Path}
	}
	if _, err := unix.Write(h.status, []byte{'R'}); err != nil {
		return exitSetup // the server is gone; nobody to run for
	}
	// RLIMIT_NPROC and the cgroup count this process's threads until exec,
	// so they come last, next to it: a small limit must not stop the Go
	// runtime from starting a thread it needs on the way.
	if cfg.NProc > 0 {
		lim := unix.Rlimit{Cur: uint64(cfg.NProc), Max: uint64(cfg.NProc)}
		if err := unix.Setrlimit(unix.RLIMIT_NPROC, &lim); err != nil {
			return h.fail("rlimit", fmt.Errorf("RLIMIT_NPROC: %w", err), exitSetup)
		}
	}
	for _, fd := range cfg.CgroupFDs {
		// "0" is the writing process: all its threads move, and after exec
		// only the target's one thread is left to count.
		if _, err := unix.Write(fd, []byte("0")); err != nil {
			return h.fail("cgroup-join", fmt.Errorf("join cgroup: %w", err), exitSetup)
		}
	}
	switch {
	case cfg.Reaper:
		return h.runAsReaper(cfg, args)
	case cfg.Init:
		return h.runWithInit(cfg, args)
	}
	err = syscall.Exec(cfg.Path, args, cfg.Env)
	code := exitNoExec
	if errors.Is(err, syscall.ENOENT) {
		code = exitNotFound
	}
	return h.fail("exec", err, code)
}

// readFD reads fd to its end with plain read(2). The helper reads only
// small things (its config, a /proc number) once; os.File would start
// the runtime's poller (epoll, an eventfd) for a file that may use it,
// which is more syscalls than the read itself.
func readFD(fd int) ([]byte, error) {
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readFile is os.ReadFile with readFD.
func readFile(path string) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	return readFD(fd)
}

// closeOnExecFrom marks every fd >= first close-on-exec (close_range,
// Linux 5.11+, else one by one from /proc/self/fd).
func closeOnExecFrom(first int) error {
	if first < 3 {
		return fmt.Errorf("bad first private fd %d", first)
	}
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil {
		return nil
	}
	entries, rerr := os.ReadDir("/proc/self/fd")
	if rerr != nil {
		return fmt.Errorf("close_range: %w; list fds: %w", err, rerr)
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= first {
			unix.CloseOnExec(fd)
		}
	}
	return nil
}

// setRlimits applies the run's limits before the capability drop, so a
// root server may also raise a hard limit. RLIMIT_CORE is always 0: the
// kernel writes core dumps itself, past Landlock, and they hold the
// process's memory.
func setRlimits(l Limits) error {
	set := func(name string, resource int, cur, max uint64) error {
		// syscall.Setrlimit (not unix) so that syscall.Exec does not
		// restore the Go runtime's saved RLIMIT_NOFILE over ours.
		if err := syscall.Setrlimit(resource, &syscall.Rlimit{Cur: cur, Max: max}); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := set("RLIMIT_CORE", unix.RLIMIT_CORE, 0, 0); err != nil {
		return err
	}
	if l.MaxFileBytes > 0 {
		if err := set("RLIMIT_FSIZE", unix.RLIMIT_FSIZE, uint64(l.MaxFileBytes), uint64(l.MaxFileBytes)); err != nil {
			return err
		}
	}
	if l.MaxOpenFiles > 0 {
		if err := set("RLIMIT_NOFILE", unix.RLIMIT_NOFILE, uint64(l.MaxOpenFiles), uint64(l.MaxOpenFiles)); err != nil {
			return err
		}
	}
	if l.MaxMemoryBytes > 0 {
		// Only without a memory cgroup: the server leaves it 0 then.
		if err := set("RLIMIT_AS", unix.RLIMIT_AS, uint64(l.MaxMemoryBytes), uint64(l.MaxMemoryBytes)); err != nil {
			return err
		}
	}
	if l.CPUSeconds > 0 {
		// SIGXCPU at the soft limit, SIGKILL a second later.
		if err := set("RLIMIT_CPU", unix.RLIMIT_CPU, uint64(l.CPUSeconds), uint64(l.CPUSeconds)+1); err != nil {
			return err
		}
	}
	return nil
}

// Securebits (linux/securebits.h) that keep uid 0 from regaining
// capabilities at exec.
const (
	secbitNoRoot                = 1 << 0
	secbitNoRootLocked          = 1 << 1
	secbitKeepCapsLocked        = 1 << 5
	secbitNoCapAmbientRaise     = 1 << 6
	secbitNoCapAmbientRaiseLock = 1 << 7
	linuxCapabilityVersion3     = 0x20080522
	capSetPCap                  = 8
)

// dropCapabilities leaves this thread, and so the exec'd target, without
// capabilities: with the bounding set emptied and SECBIT_NOROOT set, even a
// uid-0 target gains none at exec. A helper without CAP_SETPCAP (non-root,
// or bubblewrap dropped it) cannot touch the bounding set or securebits;
// that is fine when it is not uid 0, and for uid 0 the cleared permitted
// set together with no_new_privs still keeps exec from granting any.
func dropCapabilities() error {
	hdr := unix.CapUserHeader{Version: linuxCapabilityVersion3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	if data[0].Effective&(1<<capSetPCap) != 0 {
		bits := secbitNoRoot | secbitNoRootLocked | secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientRaiseLock
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_SECUREBITS): %w", err)
		}
		// Dropping a capability that is not in the set is a no-op, so
		// there is no need to read the set first (one syscall each).
		for c, last := 0, lastCap(); c <= last; c++ {
			err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
			if err != nil && !errors.Is(err, unix.EINVAL) { // EINVAL: unknown to this kernel
				return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
			}
		}
	}
	// EINVAL: a kernel before 4.3 has no ambient set.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return errors.New("capabilities are still set after capset")
		}
	}
	return nil
}

// lastCap is the highest capability number this kernel knows.
func lastCap() int {
	data, err := readFile("/proc/sys/kernel/cap_last_cap")
	if err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && n > 0 && n < 64 {
			return n
		}
	}
	return unix.CAP_LAST_CAP
}
