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
	driver   string
	helper   string // what the builtin driver execs: /proc/self/exe or Options.Helper
	tempDir  string // parent of the private temp dirs
	iso      Isolation
	cg       *cgroupRoot // nil: no writable pids cgroup
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
	s := &Sandbox{
		log:     log,
		driver:  driver,
		helper:  opts.Helper,
		tempDir: tempDir,
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
	if cg, err := probeCgroup(); err == nil {
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
		s.iso.UserNS = s.iso.Bwrap != "" && !s.iso.Root
		s.helperOK = s.iso.Bwrap != "" || s.probeHelper(s.helper, nil, nil) == nil
		return
	}
	// One throw-away helper inside the namespaces a run without network
	// gets proves they can be made (distributions may disable
	// unprivileged user namespaces) and that the helper works.
	err := s.probeHelper(s.helper, nil, s.namespaceAttr(false, false))
	if err == nil {
		s.helperOK = true
		s.iso.NetNS = true
		s.iso.UserNS = !s.iso.Root
		return
	}
	if err := s.probeHelper(s.helper, nil, &syscall.SysProcAttr{Setpgid: true}); err != nil {
		s.missing("helper: %v", err)
		return
	}
	s.helperOK = true
	s.missing("network namespace: %v", err)
	if !s.iso.Root {
		attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER, UidMappings: s.idMap(s.uid), GidMappings: s.idMap(s.gid)}
		if err := s.probeHelper(s.helper, nil, attr); err != nil {
			s.missing("user namespace: %v", err)
		} else {
			s.iso.UserNS = true
		}
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
	if err := s.probeHelper(beside, nil, &syscall.SysProcAttr{Setpgid: true}); err != nil {
		s.log.Warn("sandbox: the standalone helper beside the server does not work; using the server binary", "helper", beside, "err", err)
		return selfExe
	}
	if dynamicallyLinked(beside) {
		s.log.Info("sandbox: the helper is dynamically linked; built with CGO_ENABLED=0 it would start every sandboxed program about 3 ms sooner", "helper", beside)
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

// namespaceAttr is the builtin driver's SysProcAttr: its own process
// group always (the caller kills -pid), SIGKILL when the server thread
// that started it dies (a crash backstop; Kill and Release are the real
// mechanism), and, as root, a new network namespace unless network is
// allowed plus a new IPC namespace (System V IPC objects of other root
// processes are otherwise reachable by mode bits). Not root, the same
// namespaces need a user namespace, which is also what makes RLIMIT_NPROC
// count per run (needUserNS).
func (s *Sandbox) namespaceAttr(network, needUserNS bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var flags uintptr
	if !network {
		flags |= syscall.CLONE_NEWNET
	}
	if s.iso.Root {
		attr.Cloneflags = flags | syscall.CLONE_NEWIPC
		return attr
	}
	if flags != 0 || needUserNS {
		attr.Cloneflags = flags | syscall.CLONE_NEWUSER | syscall.CLONE_NEWIPC
		attr.UidMappings = s.idMap(s.uid)
		attr.GidMappings = s.idMap(s.gid)
		attr.GidMappingsEnableSetgroups = false
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
	if p.Limits.MaxProcesses < 0 || p.Limits.MaxFileBytes < 0 || p.Limits.MaxOpenFiles < 0 || p.Limits.CPUSeconds < 0 {
		return refuse("limits must not be negative")
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
	cg  *runCgroup // nil: none
	tmp string     // private temp dir; "" for ProfileNone
	log *slog.Logger

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
	if p.cg == nil {
		return nil
	}
	return p.cg.killAll(cgroupTimeout)
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
	if p.cg != nil {
		if err := p.cg.remove(); err != nil {
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

// Start starts cmd under p. The caller has set cmd.Path, Args, Dir, Env,
// Stdin, Stdout and Stderr (and may have set Cancel, WaitDelay and
// ExtraFiles); cmd.SysProcAttr must be nil. Start rewrites cmd to run
// through the helper (default profile) or directly (none), always as the
// leader of a new process group (pgid == pid, so the caller can signal
// -pid), and returns once the target program has been exec'd. On success
// the caller waits with cmd.Wait and then calls Release. On failure the
// error is a *StartError, everything Start made is gone, and cmd has
// already been waited for: the caller must not call Wait.
//
// For the default profile Start creates a private temp dir (0700; TMPDIR,
// TMP and TEMP point at it in the target's environment) and, when a pids
// cgroup is available, a run cgroup that the helper joins just before
// exec, so the target is counted and killable from its first instruction.
func (s *Sandbox) Start(p Policy, cmd *exec.Cmd) (*Process, error) {
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	cg    *runCgroup
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
	if r.cg != nil {
		_ = r.cg.killAll(time.Second)
		_ = r.cg.remove()
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
	tmp, err := os.MkdirTemp(s.tempDir, "troupe-run-")
	if err != nil {
		return nil, &StartError{Stage: "tempdir", Err: err}
	}
	r.tmp = tmp

	cfg := helperConfig{
		Path:        cmd.Path,
		Args:        cmd.Args,
		Env:         targetEnv(cmd, tmp),
		Workspace:   p.Workspace,
		TempDir:     tmp,
		Network:     p.AllowNetwork,
		Limits:      p.Limits,
		LandlockABI: s.iso.LandlockABI,
		CgroupFD:    -1,
	}
	var cgProcs *os.File
	if s.cg != nil {
		name := fmt.Sprintf("run-%d-%s-%d", os.Getpid(), s.token, s.seq.Add(1))
		cg, err := s.cg.create(name, p.Limits.MaxProcesses)
		if err != nil {
			return nil, &StartError{Stage: "cgroup", Err: err}
		}
		r.cg = cg
		if cgProcs, err = cg.openProcs(); err != nil {
			return nil, &StartError{Stage: "cgroup", Err: err}
		}
		r.files = append(r.files, cgProcs)
	} else if p.Limits.MaxProcesses > 0 {
		cfg.NProc = p.Limits.MaxProcesses
	}

	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	r.files = append(r.files, cfgR, cfgW)
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	r.files = append(r.files, statusR, statusW)

	// The caller's ExtraFiles keep their fd numbers (3...) in the target;
	// ours follow and are close-on-exec in the helper.
	extra := append([]*os.File(nil), cmd.ExtraFiles...)
	cfg.FirstPrivateFD = 3 + len(extra)
	fdOf := func(f *os.File) int {
		extra = append(extra, f)
		return 2 + len(extra)
	}
	cfgFD, statusFD := fdOf(cfgR), fdOf(statusW)
	if cgProcs != nil {
		cfg.CgroupFD = fdOf(cgProcs)
	}
	helperArgs := []string{HelperArg, strconv.Itoa(cfgFD), strconv.Itoa(statusFD)}

	cmd.ExtraFiles = extra
	// The helper gets its own environment; the target's is in cfg.
	cmd.Env = helperEnv()
	if s.driver == DriverBwrap {
		helper, err := s.bwrapHelper()
		if err != nil {
			return nil, &StartError{Stage: "start", Err: err}
		}
		cmd.Path = s.iso.Bwrap
		cmd.Args = append(s.bwrapArgs(p, cmd.Dir, tmp), append([]string{helper}, helperArgs...)...)
		// bwrap makes the namespaces; --die-with-parent is its Pdeathsig.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	} else {
		cmd.Path = s.helper
		cmd.Args = append([]string{"troupe-sandbox"}, helperArgs...)
		cmd.SysProcAttr = s.namespaceAttr(p.AllowNetwork, cfg.NProc > 0)
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
	// the helper (and everything that inherited it) exec'd or died.
	cfgR.Close()
	statusW.Close()
	if cgProcs != nil {
		cgProcs.Close()
	}
	r.files = []*os.File{cfgW, statusR}

	data, err := json.Marshal(cfg)
	if err != nil {
		return fail(&StartError{Stage: "config", Err: err})
	}
	deadline := time.Now().Add(setupTimeout)
	_ = cfgW.SetWriteDeadline(deadline)
	_, werr := cfgW.Write(data)
	cfgW.Close()
	// A write error (EPIPE: the helper died) is explained by the status.
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
	return &Process{pid: cmd.Process.Pid, cg: r.cg, tmp: tmp, log: s.log}, nil
}

// helperEnv is the helper's whole environment. The target's environment
// travels in the config instead, so that variables meant for it
// (LD_PRELOAD, GODEBUG, ...) never act on the helper before the sandbox is
// in place. GORACE only matters to race-detector builds (the tests), whose
// runtime would otherwise sleep a second in every helper that exits
// instead of exec'ing.
func helperEnv() []string { return []string{"GORACE=atexit_sleep_ms=0"} }

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
// namespace), the workspace and the private temp dir writable. No
// --new-session: the target must stay in our process group, so that
// killing the group kills the run.
func (s *Sandbox) bwrapArgs(p Policy, dir, tmp string) []string {
	args := []string{s.iso.Bwrap,
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--bind", p.Workspace, p.Workspace,
		"--bind", tmp, tmp,
		"--unshare-pid", "--unshare-ipc",
		"--die-with-parent",
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

// targetEnv is the target's environment: cmd.Env (or ours, as os/exec
// would use), last value of a name winning, with TMPDIR, TMP and TEMP set
// to the private temp dir.
func targetEnv(cmd *exec.Cmd, tmp string) []string {
	env := cmd.Env
	if env == nil {
		env = os.Environ()
		if cmd.Dir != "" {
			if abs, err := filepath.Abs(cmd.Dir); err == nil {
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
