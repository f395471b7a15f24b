package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// setupTimeout bounds how long Start waits for the helper to report; the
// helper does a few dozen syscalls, so this only fires on a wedged system.
const setupTimeout = 30 * time.Second

// Sandbox starts processes under a Policy. It probes the kernel once (New)
// and is safe for concurrent use.
type Sandbox struct {
	log      *slog.Logger
	observer StartObserver // Options.Observer; nil: none
	driver   string
	helper   string // what the builtin driver execs: /proc/self/exe or Options.Helper
	tempDir  string // where the temp root is made
	hidden   []string
	iso      Isolation
	cg       *cgroupRoot // nil: no writable pids cgroup
	memcg    *cgroupRoot // nil: no writable memory cgroup
	uid      int
	gid      int
	token    string        // tells our run cgroups from another Sandbox's in this process
	seq      atomic.Uint64 // numbers run cgroups
	helperOK bool          // the helper ran in probe mode
	// probed is closed once the probe has filled iso, cg, helper and
	// helperOK; the exported methods wait for it before reading them.
	probed chan struct{}
	// dumpMu serialises starts that briefly make the server dumpable
	// again (startChild).
	dumpMu sync.Mutex
	// rootMu guards tempRoot, made on the first confined start.
	rootMu   sync.Mutex
	tempRoot string
	// runtime caches the files read-only runs' programs need
	// (readonly_linux.go).
	runtime runtimeCache
	// ns holds network and IPC namespaces made ahead of runs
	// (nspool_linux.go); nil unless root with the builtin driver and
	// namespaces that work. Set by the probe.
	ns *nsPool
	// nested is probed on the first Check of a policy that allows user
	// namespaces: whether such a run's view can be made here
	// (nestedmode_linux.go).
	nested struct {
		once sync.Once
		err  error
	}
}

// New probes what the kernel supports (Landlock ABI, user and network
// namespaces, seccomp, a writable pids cgroup, bubblewrap when asked for)
// and removes run cgroups that crashed servers left behind. It fails only
// on a bad Options value; what is missing is recorded in Isolation, and
// Check refuses the policies that need it.
//
// The probe starts helper processes, which takes milliseconds, so it runs
// in the background: New returns at once, and Isolation, Check and Start
// wait for it. A server can read its configuration and answer a client's
// initialize meanwhile.
func New(opts Options) (*Sandbox, error) {
	driver, log, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	tempDir := opts.TempDir
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	tempDir, err = filepath.Abs(tempDir)
	if err != nil {
		return nil, fmt.Errorf("sandbox temp dir: %w", err)
	}
	if real, err := filepath.EvalSymlinks(tempDir); err == nil {
		// Landlock and bwrap binds see resolved paths.
		tempDir = real
	}
	var tok [4]byte
	_, _ = rand.Read(tok[:])
	s := &Sandbox{observer: opts.Observer,
		log:     log,
		driver:  driver,
		helper:  opts.Helper,
		tempDir: tempDir,
		hidden:  resolvedPaths(opts.Hidden),
		uid:     os.Getuid(),
		gid:     os.Getgid(),
		token:   hex.EncodeToString(tok[:]),
	}
	if s.helper != "" {
		if s.helper, err = filepath.Abs(s.helper); err != nil {
			return nil, fmt.Errorf("sandbox helper: %w", err)
		}
	}
	s.iso = Isolation{Driver: driver, OS: runtime.GOOS, Root: s.uid == 0}
	s.probed = make(chan struct{})
	go func() { // ends by itself: each probe run is bounded by probeTimeout
		defer close(s.probed)
		if s.helper == "" {
			s.helper = s.defaultHelper()
		}
		s.probe()
		if s.iso.Root && s.iso.NetNS && s.driver == DriverBuiltin {
			s.ns = newNSPool(log)
			runtime.AddCleanup(s, (*nsPool).drain, s.ns)
		}
		log.Debug("sandbox: probed", "isolation", s.iso.String(), "missing", s.iso.Missing, "helper", s.helper)
	}()
	return s, nil
}

// Isolation describes what is enforceable here.
func (s *Sandbox) Isolation() Isolation {
	<-s.probed
	iso := s.iso
	iso.Missing = append([]string(nil), s.iso.Missing...)
	return iso
}

func (s *Sandbox) missing(format string, args ...any) {
	s.iso.Missing = append(s.iso.Missing, fmt.Sprintf(format, args...))
}

// probe fills s.iso (and s.cg).
func (s *Sandbox) probe() {
	if abi, err := llsys.LandlockGetABIVersion(); err == nil && abi > 0 {
		s.iso.LandlockABI = abi
	} else {
		s.missing("landlock: %v", err)
	}
	if err := seccompAvailable(); err == nil {
		s.iso.Seccomp = true
	} else {
		s.missing("seccomp: %v", err)
	}
	if cg, err := probeCgroup("memory"); err == nil {
		s.memcg = cg
		s.iso.MemoryCgroup = cg.version
		cg.removeStale(s.log)
	} else {
		s.missing("memory cgroup: %v", err)
	}
	if cg, err := probeCgroup("pids"); err == nil {
		s.cg = cg
		s.iso.PidsCgroup = cg.version
		cg.removeStale(s.log)
	} else {
		s.missing("pids cgroup: %v", err)
	}
	if s.driver == DriverBwrap {
		s.probeBwrap()
		// bubblewrap makes the namespaces itself.
		s.iso.NetNS = s.iso.Bwrap != ""
		s.iso.MountNS = s.iso.Bwrap != ""
		s.iso.UserNS = s.iso.Bwrap != "" && !s.iso.Root
		s.helperOK = s.iso.Bwrap != "" || s.probeHelper(s.helper, nil, nil) == nil
		return
	}
	// One throw-away helper inside every namespace a run without network
	// gets (and "probe mounts": with the mount view made in them) proves
	// they can be made (distributions may disable unprivileged user
	// namespaces) and that the helper works.
	mountProbe := []string{HelperArg, "probe", "mounts"}
	all := uintptr(syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNS)
	if s.cg == nil {
		mountProbe = append(mountProbe, "pidns")
	}
	err := s.probeHelper(s.helper, mountProbe, s.cloneAttr(all))
	if err == nil {
		s.helperOK = true
		s.iso.NetNS, s.iso.MountNS = true, true
		s.iso.PidNS = s.cg == nil
		s.iso.UserNS = !s.iso.Root
		return
	}
	if err := s.probeHelper(s.helper, nil, s.cloneAttr(0)); err != nil {
		s.missing("helper: %v", err)
		return
	}
	s.helperOK = true
	s.missing("namespaces: %v", err)
	// Each namespace alone, to keep what works.
	if err := s.probeHelper(s.helper, nil, s.cloneAttr(syscall.CLONE_NEWNET|syscall.CLONE_NEWIPC)); err != nil {
		s.missing("network namespace: %v", err)
	} else {
		s.iso.NetNS = true
	}
	if err := s.probeHelper(s.helper, mountProbe, s.cloneAttr(syscall.CLONE_NEWNS)); err != nil {
		s.missing("mount namespace: %v", err)
	} else {
		s.iso.MountNS = true
	}
	if s.cg == nil {
		if err := s.probeHelper(s.helper, []string{HelperArg, "probe", "pidns"}, s.cloneAttr(syscall.CLONE_NEWUSER)); err != nil {
			s.missing("pid namespace: %v", err)
		} else {
			s.iso.PidNS = true
		}
	}
	if !s.iso.Root {
		if err := s.probeHelper(s.helper, nil, s.cloneAttr(syscall.CLONE_NEWUSER)); err != nil {
			s.missing("user namespace: %v", err)
		} else {
			s.iso.UserNS = true
		}
	}
	if !s.iso.PidNS && s.cg == nil {
		s.log.Warn("sandbox: neither a pids cgroup nor a PID namespace: a run's process that leaves its process group (setsid) can outlive the run", "missing", s.iso.Missing)
	}
}

// selfExe is the running binary, even if its file was replaced since.
const selfExe = "/proc/self/exe"

// defaultHelper is HelperName beside the server's executable when it is
// there and answers the probe with HelperProtocol, else the server itself.
func (s *Sandbox) defaultHelper() string {
	exe, err := os.Executable()
	if err != nil {
		return selfExe
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	beside := filepath.Join(filepath.Dir(exe), HelperName)
	if fi, err := os.Stat(beside); err != nil || !fi.Mode().IsRegular() || filepath.Base(exe) == HelperName {
		return selfExe
	}
	if err := s.probeHelper(beside, nil, &syscall.SysProcAttr{Setsid: true}); err != nil {
		s.log.Warn("sandbox: the standalone helper beside the server does not work; using the server binary", "helper", beside, "err", err)
		return selfExe
	}
	if dynamicallyLinked(beside) {
		s.log.Info("sandbox: the helper is dynamically linked; built with CGO_ENABLED=0 it would start every sandboxed program about 0.4 ms sooner", "helper", beside)
	}
	return beside
}

// dynamicallyLinked reports whether the ELF executable at path asks for a
// program interpreter (the dynamic loader).
func dynamicallyLinked(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// probeTimeout bounds one probe run; a helper that does not return at
// once is not a working helper.
const probeTimeout = 10 * time.Second

// probeHelper runs path (the helper, or bwrap with its arguments in args)
// in probe mode with attr and returns why it failed, if it did.
func (s *Sandbox) probeHelper(path string, args []string, attr *syscall.SysProcAttr) error {
	if args == nil {
		args = []string{HelperArg, "probe"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = helperEnv()
	cmd.SysProcAttr = attr
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := s.startChild(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return fmt.Errorf("%w %s", err, excerpt(out.Bytes()))
	}
	// The last line: bwrap may warn before the helper runs.
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got := strings.TrimSpace(lines[len(lines)-1]); got != HelperProtocol {
		return fmt.Errorf("the helper speaks %q, not %q", excerpt([]byte(got)), HelperProtocol)
	}
	return nil
}

// probeBwrap finds bwrap and runs the helper under the arguments a run
// would use.
func (s *Sandbox) probeBwrap() {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		s.missing("bwrap: not found on PATH")
		return
	}
	helper, err := s.bwrapHelper()
	if err != nil {
		s.missing("bwrap: %v", err)
		return
	}
	args := []string{"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--die-with-parent", "--", helper, HelperArg, "probe"}
	if err := s.probeHelper(path, args, nil); err != nil {
		s.missing("bwrap: does not work here: %v", err)
		return
	}
	s.iso.Bwrap = path
}

// bwrapHelper is the helper's path as seen inside bubblewrap, where
// /proc/self/exe would name bwrap itself.
func (s *Sandbox) bwrapHelper() (string, error) {
	if s.helper != selfExe {
		return filepath.Abs(s.helper)
	}
	return os.Executable()
}

func (s *Sandbox) idMap(id int) []syscall.SysProcIDMap {
	// The own id maps to itself: files the run creates in the workspace
	// belong to the server's user, and the target is not root inside.
	return []syscall.SysProcIDMap{{ContainerID: id, HostID: id, Size: 1}}
}

// namespaceAttr is the builtin driver's SysProcAttr for a run: the
// namespaces the probe found (a network namespace unless network is
// allowed, IPC and mount namespaces; the helper unshares a PID namespace
// itself when there is no pids cgroup), inside a user namespace when the
// server is not root; needUserNS
// asks for one even without other namespaces (RLIMIT_NPROC then counts per
// run). pooled says the helper joins a network and an IPC namespace made
// ahead of time (nspool_linux.go) instead.
func (s *Sandbox) namespaceAttr(network, needUserNS, pooled bool) *syscall.SysProcAttr {
	var flags uintptr
	if s.iso.NetNS && !pooled {
		flags |= syscall.CLONE_NEWIPC
		if !network {
			flags |= syscall.CLONE_NEWNET
		}
	}
	if s.iso.MountNS {
		flags |= syscall.CLONE_NEWNS
	}
	if flags == 0 && (needUserNS || s.iso.PidNS) && !s.iso.Root {
		flags = syscall.CLONE_NEWUSER
	}
	return s.cloneAttr(flags)
}

// cloneAttr starts the helper in a new session (so with no controlling
// terminal: a terminal troupe runs in is out of reach, TIOCSTI included,
// and the session id is the caller's process group to kill), with SIGKILL
// when the server thread that started it dies (a crash backstop; Kill and
// Release are the real mechanism), and in the namespaces of flags; a
// server that is not root makes them inside a new user namespace, where
// its own ids map to themselves (files the run creates in the workspace
// belong to the server's user, and the target is not root inside).
//
// Mount and PID namespaces are set up by the helper itself (the mount
// view, unsharing the PID namespace for init); a helper that is not uid 0
// loses its capabilities at exec even in its own user namespace, so it
// keeps CAP_SYS_ADMIN as an ambient capability, and drops it with all the
// others before the target runs.
func (s *Sandbox) cloneAttr(flags uintptr) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: flags}
	if flags != 0 && !s.iso.Root {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = s.idMap(s.uid)
		attr.GidMappings = s.idMap(s.gid)
		attr.GidMappingsEnableSetgroups = false
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN}
	}
	return attr
}

// startChild is cmd.Start, made to work for a non-root server that called
// ProtectProcess. A forked child inherits non-dumpability until it execs,
// which makes its /proc/<pid>/uid_map root's, so a non-root server could
// not write the user namespace's id maps and the start fails with EACCES.
// The server is therefore dumpable again for the few milliseconds of the
// fork, the map writes and the helper's exec (cmd.Start returns after the
// exec). Landlock keeps confined runs from using that window (it denies
// ptrace-style access, /proc/<pid>/environ included, to processes outside
// their domain); only unconfined runs of the same uid could.
func (s *Sandbox) startChild(cmd *exec.Cmd) error {
	if s.iso.Root || cmd.SysProcAttr == nil || cmd.SysProcAttr.Cloneflags&syscall.CLONE_NEWUSER == 0 {
		return cmd.Start()
	}
	s.dumpMu.Lock()
	defer s.dumpMu.Unlock()
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		return cmd.Start()
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 1): %w", err)
	}
	defer func() {
		if err := ProtectProcess(); err != nil {
			s.log.Error("sandbox: cannot make the server non-dumpable again", "err", err)
		}
	}()
	return cmd.Start()
}

// Check says whether p can be enforced here: nil, or an
// *UnenforceableError naming what is missing and how to fix it. Start
// calls it too; a tool whose policy fails it does not run (fail closed).
func (s *Sandbox) Check(p Policy) error {
	<-s.probed
	if err := s.checkReadOnly(p); err != nil {
		return err
	}
	profile := p.Profile
	switch profile {
	case ProfileNone:
		return nil
	case "", ProfileDefault, ProfileSeatbelt:
		if profile == "" {
			profile = ProfileDefault
		}
	default:
		return &UnenforceableError{Profile: p.Profile, Reason: "unknown profile"}
	}
	refuse := func(format string, args ...any) error {
		return &UnenforceableError{Profile: profile, Reason: fmt.Sprintf(format, args...)}
	}
	const orNone = `or set sandbox_profile = "none" for this tool`
	if !filepath.IsAbs(p.Workspace) {
		return refuse("the workspace must be an absolute path")
	}
	if fi, err := os.Stat(p.Workspace); err != nil || !fi.IsDir() {
		return refuse("the workspace is not a directory")
	}
	if p.Limits.MaxProcesses < 0 || p.Limits.MaxFileBytes < 0 || p.Limits.MaxOpenFiles < 0 || p.Limits.CPUSeconds < 0 || p.Limits.MaxMemoryBytes < 0 {
		return refuse("limits must not be negative")
	}
	// What runs must not see cannot lie where they may write.
	hidden := append(append([]string{s.tempDir}, s.hidden...), resolvedPaths(p.Hidden)...)
	for _, h := range hidden {
		if inside(h, p.Workspace) {
			return refuse("troupe's temp dir, spool, audit log and config must lie outside the workspace; move them (TMPDIR, output.spool_dir, audit.path, --config) or choose another workspace")
		}
	}
	for _, w := range p.Writable {
		if !filepath.IsAbs(w) || filepath.Clean(w) != w {
			return refuse("a writable directory must be a clean absolute path")
		}
		if fi, err := os.Stat(w); err != nil || !fi.IsDir() {
			return refuse("a writable directory is not a directory")
		}
		for _, h := range hidden {
			if inside(h, w) {
				return refuse("a writable directory contains troupe's temp dir or a hidden path; choose one that does not")
			}
		}
	}
	for _, h := range p.Hidden {
		if !filepath.IsAbs(h) {
			return refuse("a hidden path must be absolute")
		}
	}
	switch {
	case !s.helperOK:
		return refuse("the sandbox helper does not run (the server binary must call sandbox.HelperMain when its first argument is %s); %s", HelperArg, orNone)
	case s.driver == DriverBwrap && s.iso.Bwrap == "":
		return refuse("the bwrap driver needs bubblewrap installed and working (bwrap on PATH, user namespaces or root); install bubblewrap, use the builtin driver, %s", orNone)
	case s.driver == DriverBuiltin && s.iso.LandlockABI == 0:
		return refuse("the default profile needs Landlock (Linux 5.13+ with landlock in the LSM list) or bubblewrap; enable Landlock, install bubblewrap and use the bwrap driver, %s", orNone)
	case !s.iso.Seccomp:
		return refuse("the default profile needs seccomp filters (CONFIG_SECCOMP_FILTER on x86-64 or arm64); %s", orNone)
	}
	if p.AllowUserNamespaces {
		if err := s.checkNested(p, profile); err != nil {
			return err
		}
	}
	if p.Limits.MaxProcesses > 0 && s.iso.PidsCgroup == "" {
		if s.iso.Root {
			return refuse("max_processes needs a writable pids cgroup when troupe runs as root (the kernel does not apply RLIMIT_NPROC to uid 0); set max_processes = 0 or give troupe a pids cgroup (a delegated cgroup v2 subtree with the pids controller, or a writable cgroup v1 pids hierarchy)")
		}
		if !s.iso.UserNS {
			return refuse("max_processes needs a writable pids cgroup or unprivileged user namespaces (to count processes per run); set max_processes = 0, allow user namespaces, or give troupe a pids cgroup")
		}
	}
	return nil
}

// Process is one started run. The caller waits for it with cmd.Wait and
// then calls Release.
type Process struct {
	pid int
	// cgs are the run's cgroups (memory, pids); none without
	// cgroups.
	cgs []*runCgroup
	tmp string // private temp dir; "" for ProfileNone
	log *slog.Logger
	// ns is the namespace pool to refill once the run is released; nil
	// when the run took nothing from it.
	ns *nsPool

	mu         sync.Mutex
	released   bool
	releaseErr error
}

// Pid is the process id of the started process, which is also its process
// group id. With the bwrap driver it is bwrap's.
func (p *Process) Pid() int { return p.pid }

// Kill sends SIGKILL to the process group and to every process in the
// run's cgroup (which catches processes that left the group with setsid).
// It is safe to call many times, concurrently, and after exit; after
// Release it does nothing. Between cmd.Wait and Release, a group whose
// members are all gone no longer reserves its id, so call Release
// promptly.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return
	}
	p.killLocked(time.Second)
}

func (p *Process) killLocked(cgroupTimeout time.Duration) error {
	_ = unix.Kill(-p.pid, unix.SIGKILL)
	var errs []error
	for _, cg := range p.cgs {
		errs = append(errs, cg.killAll(cgroupTimeout))
	}
	return errors.Join(errs...)
}

// Release is called once cmd.Wait has returned: it kills survivors (the
// group and the cgroup), removes the cgroup and the private temp dir.
// Idempotent: later calls return the first call's result.
func (p *Process) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return p.releaseErr
	}
	p.released = true
	var errs []error
	if err := p.killLocked(5 * time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := awaitGroupGone(p.pid, 2*time.Second); err != nil {
		errs = append(errs, err)
	}
	for _, cg := range p.cgs {
		if err := cg.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	if p.tmp != "" {
		if err := removeTree(p.tmp); err != nil {
			errs = append(errs, fmt.Errorf("remove private temp dir: %w", err))
		}
	}
	p.releaseErr = errors.Join(errs...)
	if p.releaseErr != nil {
		p.log.Warn("sandbox: release left something behind", "pid", p.pid, "err", p.releaseErr)
	}
	if p.ns != nil {
		p.ns.refill()
	}
	return p.releaseErr
}

// awaitGroupGone waits until the killed process group pgid has no live
// members left (SIGKILL is delivered asynchronously), so that Release
// means gone. Zombies count as gone: orphans are reaped by init, which on
// some systems takes a second or two.
func awaitGroupGone(pgid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 20*time.Millisecond) {
		if !groupAlive(pgid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process group %d still has members %v after SIGKILL", pgid, timeout)
		}
		time.Sleep(pause)
	}
}

// groupAlive reports whether process group pgid has a member that is not
// a zombie.
func groupAlive(pgid int) bool {
	if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything, so
		// parse after its last ')'.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// removeTree removes dir; when a run left directories without write or
// search permission (chmod 0500 under a non-root server), it makes them
// writable and tries again.
func removeTree(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(path, 0o700)
		}
		return nil
	})
	_ = os.Chmod(dir, 0o700)
	return os.RemoveAll(dir)
}

// start is Start on Linux: the helper for the default profile (with its
// temp dir and run cgroup), a plain exec for none.
func (s *Sandbox) start(p Policy, cmd *exec.Cmd) (*Process, error) {
	if err := checkCmd(cmd); err != nil {
		return nil, err
	}
	if err := s.Check(p); err != nil {
		return nil, &StartError{Stage: "policy", Err: err}
	}
	if p.Profile == ProfileNone {
		return s.startNone(cmd)
	}
	return s.startConfined(p, cmd)
}

func (s *Sandbox) startNone(cmd *exec.Cmd) (*Process, error) {
	// A session of its own, as every program troupe starts: no
	// controlling terminal to type into.
	NewSession(cmd)
	if err := cmd.Start(); err != nil {
		stage := "start"
		var errno syscall.Errno
		if errors.As(err, &errno) {
			stage = "exec"
		}
		return nil, &StartError{Stage: stage, Err: err}
	}
	return &Process{pid: cmd.Process.Pid, log: s.log}, nil
}

// run collects what one confined start has made, so a failure can undo it.
type run struct {
	tmp   string
	cgs   []*runCgroup
	files []*os.File // the child's ends and our ends of the pipes
}

func (r *run) closeFiles() {
	for _, f := range r.files {
		f.Close()
	}
	r.files = nil
}

// undo removes what a failed start made. The process, if it ran, has been
// killed and waited for.
func (r *run) undo() {
	r.closeFiles()
	for _, cg := range r.cgs {
		_ = cg.killAll(time.Second)
		_ = cg.remove()
	}
	if r.tmp != "" {
		_ = removeTree(r.tmp)
	}
}

func (s *Sandbox) startConfined(p Policy, cmd *exec.Cmd) (proc *Process, err error) {
	r := &run{}
	defer func() {
		if err != nil {
			r.undo()
		}
	}()
	root, err := s.ensureTempRoot()
	if err != nil {
		return nil, &StartError{Stage: "tempdir", Err: err}
	}
	nested := p.AllowUserNamespaces
	// A run allowed user namespaces is started in a PID namespace of its
	// own, whose first process is the helper (nestedmode_linux.go).
	withInit := s.driver != DriverBwrap && s.iso.PidNS && !nested
	var progFiles []string
	if p.ReadOnlyWorkspace {
		// init is the helper exec'd again, so it needs the helper's
		// files too.
		var serr *StartError
		if progFiles, serr = s.runtimeFiles(cmd, withInit); serr != nil {
			return nil, serr
		}
	}
	if s.driver == DriverBwrap {
		// bwrap's arguments bind the temp dir.
		if err := r.makeTemp(root); err != nil {
			return nil, err
		}
	}

	// The helper starts first: a Go program takes about a millisecond to
	// reach its main, in which the server makes the run's temp dir and
	// cgroups and writes the config (startHelper). The config travels over
	// a socket, so that the cgroups' fds, made after the start, can go
	// with it.
	cfgConn, cfgChild, err := configSocket()
	if err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	r.files = append(r.files, cfgConn, cfgChild)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	r.files = append(r.files, statusR, statusW)

	// The caller's ExtraFiles keep their fd numbers (3...) in the target;
	// ours follow and are close-on-exec in the helper.
	extra := append([]*os.File(nil), cmd.ExtraFiles...)
	firstPrivate := 3 + len(extra)
	fdOf := func(f *os.File) int {
		extra = append(extra, f)
		return 2 + len(extra)
	}
	cfgFD, statusFD := fdOf(cfgChild), fdOf(statusW)
	var netNS, ipcNS int
	var pool *nsPool // set when this run takes namespaces from it
	if s.ns != nil && s.driver == DriverBuiltin && !p.AllowNetwork && !nested {
		if ns, ok := s.ns.take(); ok {
			pool = s.ns
			r.files = append(r.files, ns.net, ns.ipc)
			netNS, ipcNS = fdOf(ns.net), fdOf(ns.ipc)
		}
	}
	helperArgs := []string{HelperArg, strconv.Itoa(cfgFD), strconv.Itoa(statusFD)}
	target := cmd.Path
	targetArgs := cmd.Args
	env := cmd.Env
	cmd.ExtraFiles = extra
	// The helper gets its own environment; the target's is in cfg.
	cmd.Env = helperEnv()
	if s.driver == DriverBwrap {
		helper, err := s.bwrapHelper()
		if err != nil {
			return nil, &StartError{Stage: "start", Err: err}
		}
		cmd.Path = s.iso.Bwrap
		cmd.Args = append(s.bwrapArgs(p, cmd.Dir, root, r.tmp), append([]string{helper}, helperArgs...)...)
		// bwrap makes the namespaces; --die-with-parent is its Pdeathsig.
		cmd.SysProcAttr = s.cloneAttr(0)
	} else {
		cmd.Path = s.helper
		cmd.Args = append([]string{"troupe-sandbox"}, helperArgs...)
		if nested {
			cmd.SysProcAttr = s.nestedAttr(p.AllowNetwork)
		} else {
			cmd.SysProcAttr = s.namespaceAttr(p.AllowNetwork, p.Limits.MaxProcesses > 0 && s.cg == nil, netNS > 0)
		}
	}

	if err := s.startChild(cmd); err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	// From here a failure must also kill and reap the helper.
	fail := func(e *StartError) (*Process, error) {
		_ = unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, e
	}
	// Our copies of the child's ends go, so EOF on the status pipe means
	// the helper (and everything that inherited it) exec'd or died. The
	// pooled namespaces' fds go too (extra holds all of them).
	for _, f := range extra[firstPrivate-3:] {
		f.Close()
	}
	r.files = []*os.File{cfgConn, statusR}

	if r.tmp == "" {
		if err := r.makeTemp(root); err != nil {
			return fail(err)
		}
	}
	cfg := helperConfig{
		Path:           target,
		Args:           targetArgs,
		Env:            targetEnv(env, cmd.Dir, r.tmp),
		Workspace:      p.Workspace,
		TempDir:        r.tmp,
		Writable:       p.Writable,
		Network:        p.AllowNetwork,
		Limits:         p.Limits,
		LandlockABI:    s.iso.LandlockABI,
		FirstPrivateFD: firstPrivate,
		NetNS:          netNS,
		IPCNS:          ipcNS,
		Init:           withInit,
		ReadOnly:       p.ReadOnlyWorkspace,
		Runtime:        progFiles,
		UserNS:         nested,
		Reaper:         nested && s.driver == DriverBuiltin,
	}
	writable := append([]string{p.Workspace, r.tmp}, p.Writable...)
	switch {
	case s.driver == DriverBwrap && nested:
		// The helper has CAP_SYS_ADMIN in bwrap's user namespace
		// (--cap-add): the view carries the filesystem confinement.
		cfg.Mounts = &mountView{Writable: writable, Private: true, NoDev: true, Proc: procKeep, Tmp: privateTmpDir()}
	case s.driver == DriverBwrap:
		// bwrap makes the view, covers included; a root run keeps its
		// capabilities in there, so the helper makes every mount but the
		// writable binds read-only (bwrap's device nodes are not).
		if s.iso.Root {
			cfg.Mounts = &mountView{Writable: writable, Private: true}
		}
	case s.iso.MountNS:
		cfg.Mounts = &mountView{Writable: writable, Hidden: s.hiddenFor(p, root), Private: true}
		if nested {
			cfg.Mounts.NoDev, cfg.Mounts.Proc = true, procMount
			cfg.Mounts.Tmp = privateTmpDir()
		}
	default:
		cfg.DenyMetadata = true
	}
	// The limits' cgroups, which the helper joins just before exec through
	// fds of their cgroup.procs: a memory cgroup (else the helper sets
	// RLIMIT_AS) and a pids cgroup.
	var cgProcs []*os.File
	defer func() {
		for _, f := range cgProcs {
			f.Close()
		}
	}()
	addCgroup := func(root *cgroupRoot, limit int64) error {
		name := fmt.Sprintf("run-%d-%s-%d", os.Getpid(), s.token, s.seq.Add(1))
		cg, err := root.create(name, limit)
		if err != nil {
			return err
		}
		r.cgs = append(r.cgs, cg)
		f, err := cg.openProcs()
		if err != nil {
			return err
		}
		cgProcs = append(cgProcs, f)
		return nil
	}
	if s.memcg != nil && p.Limits.MaxMemoryBytes > 0 {
		if err := addCgroup(s.memcg, p.Limits.MaxMemoryBytes); err != nil {
			return fail(&StartError{Stage: "cgroup", Err: err})
		}
		cfg.Limits.MaxMemoryBytes = 0
	}
	if s.cg != nil {
		if err := addCgroup(s.cg, int64(p.Limits.MaxProcesses)); err != nil {
			return fail(&StartError{Stage: "cgroup", Err: err})
		}
	} else if p.Limits.MaxProcesses > 0 {
		cfg.NProc = p.Limits.MaxProcesses
	}
	cfg.Cgroups = len(cgProcs)

	deadline := time.Now().Add(setupTimeout)
	// A write error (EPIPE: the helper died) is explained by the status.
	werr := sendConfig(cfgConn, cfg.marshal(), cgProcs, deadline)
	cfgConn.Close()
	_ = statusR.SetReadDeadline(deadline)
	status, rerr := io.ReadAll(statusR)
	statusR.Close()
	r.files = nil
	if rerr != nil {
		return fail(&StartError{Stage: "helper", Err: rerr})
	}
	if e := parseStatus(status); e != nil {
		return fail(e)
	}
	if !bytes.Equal(status, []byte{'R'}) {
		se := &StartError{Stage: "helper", Err: safeError("the sandbox helper exited before running the program")}
		_, _ = fail(se)
		var diag []string
		if werr != nil {
			diag = append(diag, "config write: "+werr.Error())
		}
		if cmd.ProcessState != nil {
			diag = append(diag, "helper: "+cmd.ProcessState.String())
		}
		se.Stderr = strings.Join(diag, "; ")
		return nil, se
	}
	return &Process{pid: cmd.Process.Pid, cgs: r.cgs, tmp: r.tmp, log: s.log, ns: pool}, nil
}

// makeTemp makes the run's private temp dir in root.
func (r *run) makeTemp(root string) *StartError {
	tmp, err := os.MkdirTemp(root, fmt.Sprintf("run-%d-", os.Getpid()))
	if err != nil {
		return &StartError{Stage: "tempdir", Err: err}
	}
	r.tmp = tmp
	return nil
}

// helperEnv is the helper's whole environment. The target's environment
// travels in the config instead, so that variables meant for it
// (LD_PRELOAD, GODEBUG, ...) never act on the helper before the sandbox is
// in place. GORACE only matters to race-detector builds (the tests), whose
// runtime would otherwise sleep a second in every helper that exits
// instead of exec'ing.
//
// GOMAXPROCS=1: the helper runs one goroutine that matters, and a Go
// program told its GOMAXPROCS skips working it out from the cgroup's CPU
// limit (several files read at start) and starts fewer threads, which
// Landlock's all-threads calls and the exec then have to visit.
func helperEnv() []string { return []string{"GORACE=atexit_sleep_ms=0", "GOMAXPROCS=1"} }

// parseStatus turns the helper's failure report ('E' + JSON, possibly after
// 'R' when exec itself failed) into a StartError; nil if there is none.
func parseStatus(status []byte) *StartError {
	i := bytes.IndexByte(status, 'E')
	if i < 0 {
		return nil
	}
	var st helperStatus
	if err := json.Unmarshal(status[i+1:], &st); err != nil {
		return &StartError{Stage: "helper", Err: safeError("unreadable report from the sandbox helper"), Stderr: excerpt(status)}
	}
	var err error = safeError(st.Stage + " failed")
	if st.Errno != 0 {
		err = syscall.Errno(st.Errno)
	}
	return &StartError{Stage: st.Stage, Err: err, Stderr: st.Msg}
}

// bwrapArgs are bubblewrap's arguments up to and including "--": the
// whole filesystem read-only, a fresh /dev and /proc (in a new pid
// namespace), troupe's temp root and Options.Hidden covered, the workspace
// and the private temp dir writable. No --new-session: bwrap itself starts
// a session of its own (cloneAttr), so the run has no controlling terminal
// and stays in the process group the runner kills.
func (s *Sandbox) bwrapArgs(p Policy, dir, root, tmp string) []string {
	args := []string{s.iso.Bwrap, "--ro-bind", "/", "/"}
	if !p.AllowUserNamespaces {
		// A run allowed user namespaces gets its /dev from the helper
		// (bwrapNestedArgs).
		args = append(args, "--dev", "/dev")
	}
	args = append(args, "--proc", "/proc")
	var covered []string
	for _, h := range s.hiddenFor(p, root) {
		fi, err := os.Lstat(h)
		switch {
		case err != nil:
		case fi.IsDir():
			args = append(args, "--tmpfs", h)
			covered = append(covered, h)
		default:
			args = append(args, "--ro-bind", "/dev/null", h)
		}
	}
	for _, w := range append([]string{p.Workspace, tmp}, p.Writable...) {
		args = append(args, "--bind", w, w)
	}
	for _, h := range covered {
		args = append(args, "--remount-ro", h)
	}
	args = append(args, "--unshare-pid", "--unshare-ipc", "--die-with-parent")
	if p.AllowUserNamespaces {
		args = append(args, s.bwrapNestedArgs()...)
	}
	if !p.AllowNetwork {
		args = append(args, "--unshare-net")
	}
	if dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			args = append(args, "--chdir", abs)
		}
	}
	return append(args, "--")
}

// hiddenFor is what a run under p must not see: troupe's temp root,
// Options.Hidden and the policy's own Hidden.
func (s *Sandbox) hiddenFor(p Policy, root string) []string {
	return append(append([]string{root}, s.hidden...), resolvedPaths(p.Hidden)...)
}

// TempRoot makes (once) and returns troupe's temp root (see the package
// TempRoot): confined runs never see it, except a directory in it that a
// Policy names in Writable. troupe keeps there what belongs to one
// long-lived run and no other, such as a downstream server's home.
func (s *Sandbox) TempRoot() (string, error) { return s.ensureTempRoot() }

// ensureTempRoot makes (once) troupe's temp root, which holds every run's
// private temp dir.
func (s *Sandbox) ensureTempRoot() (string, error) {
	s.rootMu.Lock()
	defer s.rootMu.Unlock()
	if s.tempRoot != "" {
		return s.tempRoot, nil
	}
	root, err := MakeTempRoot(s.tempDir)
	if err != nil {
		return "", err
	}
	s.tempRoot = root
	return root, nil
}

// MakeTempRoot makes troupe's temp root in tempDir (TempRoot), mode 0700,
// unless it exists, and returns it. It is shared by the servers of one
// user and hidden from their runs; one that exists must be a real
// directory of ours that nobody else can enter, or a run's temp dir (or a
// spool in it) could be planted or watched by another user.
func MakeTempRoot(tempDir string) (string, error) {
	root := TempRoot(tempDir)
	if err := os.Mkdir(root, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("make the temp root: %w", err)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return "", fmt.Errorf("temp root: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if uid := os.Getuid(); !fi.IsDir() || !ok || int(st.Uid) != uid || fi.Mode().Perm()&0o077 != 0 {
		return "", safeError(fmt.Sprintf("troupe's temp root %s must be a directory of uid %d with mode 0700; remove it or set TMPDIR elsewhere", root, uid))
	}
	removeStaleTemp(root)
	return root, nil
}

// removeStaleTemp removes what servers that are gone left in the temp
// root: run temp dirs ("run-<pid>-…") and session spools
// ("troupe-output-<pid>-…") whose server pid no longer exists. A crash
// skips Release and the session's cleanup; the next server start tidies
// up. Entries of live servers (ours included) and names without a pid are
// left alone.
func removeStaleTemp(root string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "run-")
		if !ok {
			rest, ok = strings.CutPrefix(e.Name(), "troupe-output-")
		}
		digits, _, found := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(digits)
		if !ok || !found || err != nil || pid <= 0 || pid == os.Getpid() || processExists(pid) {
			continue
		}
		_ = removeTree(filepath.Join(root, e.Name()))
	}
}

// resolvedPaths makes paths absolute and resolves the symlinks of those
// that exist, so they compare with the paths mounts and Landlock see.
func resolvedPaths(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		out = append(out, abs)
	}
	return out
}

// targetEnv is the target's environment: env, the command's Env (nil:
// ours, as os/exec would use, with PWD for dir), last value of a name
// winning, with TMPDIR, TMP and TEMP set to the private temp dir.
func targetEnv(env []string, dir, tmp string) []string {
	if env == nil {
		env = os.Environ()
		if dir != "" {
			if abs, err := filepath.Abs(dir); err == nil {
				env = append(env, "PWD="+abs)
			}
		}
	}
	env = append(append([]string(nil), env...), "TMPDIR="+tmp, "TMP="+tmp, "TEMP="+tmp)
	seen := make(map[string]int, len(env))
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if i, dup := seen[name]; dup {
			out[i] = kv
			continue
		}
		seen[name] = len(out)
		out = append(out, kv)
	}
	return out
}

// excerpt shortens diagnostics for a log line.
func excerpt(b []byte) string {
	const max = 512
	s := strings.TrimSpace(string(b))
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}

// ProtectProcess makes the calling process non-dumpable, so that processes
// running as the same uid (sandboxed or not, without CAP_SYS_PTRACE) cannot
// read /proc/<server>/environ, /mem or attach to it. cmd/troupe calls it
// once at the start of serve. It is inherited by forks and reset by exec,
// so children are unaffected.
func ProtectProcess() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
