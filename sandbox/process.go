package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Profile names a process sandbox profile.
type Profile string

const (
	// ProfileNone is for trusted programs: the process gets its own process
	// group (so it can be killed as a whole) and nothing else. Limits do
	// not apply.
	ProfileNone Profile = "none"
	// ProfileDefault confines a program on Linux: the filesystem is
	// read-only except the workspace and a private temp dir, there is no
	// network unless the policy allows it, and resource limits apply.
	ProfileDefault Profile = "default"
	// ProfileSeatbelt is meant for macOS's sandbox-exec with the same
	// meaning as ProfileDefault. On Linux it is an alias of ProfileDefault,
	// so one configuration serves both systems; on macOS it is not
	// implemented yet and Check reports it as unenforceable.
	ProfileSeatbelt Profile = "seatbelt"
)

// ParseProfile accepts "", "none", "default" and "seatbelt"; "" means
// ProfileDefault, so a tool without a setting is confined.
func ParseProfile(s string) (Profile, error) {
	switch Profile(s) {
	case "":
		return ProfileDefault, nil
	case ProfileNone, ProfileDefault, ProfileSeatbelt:
		return Profile(s), nil
	}
	return "", fmt.Errorf("unknown sandbox profile %q (want %q, %q or %q)", s, ProfileDefault, ProfileNone, ProfileSeatbelt)
}

// Limits are resource limits of one sandboxed run. 0 means "no limit"
// (for MaxOpenFiles: inherit the server's soft limit).
type Limits struct {
	// MaxProcesses is how many processes and threads the run may have at
	// once: the fork-bomb guard. It is a pids cgroup's pids.max when a
	// cgroup is available, else RLIMIT_NPROC inside a fresh user namespace
	// (non-root only: the kernel never applies RLIMIT_NPROC to uid 0).
	MaxProcesses int
	// MaxFileBytes is RLIMIT_FSIZE: the largest file the run may write.
	MaxFileBytes int64
	// MaxOpenFiles is RLIMIT_NOFILE.
	MaxOpenFiles int
	// CPUSeconds is RLIMIT_CPU: SIGXCPU after this much CPU time, SIGKILL
	// one second later.
	CPUSeconds int
	// MaxMemoryBytes is the memory the run's processes may use together:
	// memory.limit_in_bytes of a per-run memory cgroup (v1) when one can
	// be made (the kernel's OOM killer ends the run's biggest process past
	// it), else RLIMIT_AS of each process, which counts address space
	// rather than memory (allocations fail past it).
	MaxMemoryBytes int64
}

// Policy is what one run is allowed.
type Policy struct {
	Profile Profile
	// Workspace is the one writable directory besides the private temp
	// dir: absolute, symlinks resolved (workspace.Root.Dir gives such a path).
	Workspace    string
	AllowNetwork bool
	Limits       Limits
	// ReadOnlyWorkspace narrows the run to reading: it may read the
	// workspace and the files its program needs to start (the executable,
	// its ELF interpreter and shared libraries) and nothing else, and it
	// may write nothing, not even a temp dir. For programs that only search
	// the workspace (rg): whatever path they are given or a symlink swapped
	// in while they walk leads to, no byte from outside the workspace
	// reaches them.
	ReadOnlyWorkspace bool
	// Writable are further directories the run may write besides the
	// workspace (absolute, symlinks resolved): a long-lived program's own
	// state, such as Codex's CODEX_HOME. They stay visible and writable
	// even when they lie beneath a hidden path (Options.Hidden or Hidden).
	Writable []string
	// Hidden are further paths this run must not see, besides
	// Options.Hidden: a directory appears empty, a file as /dev/null.
	Hidden []string
	// AllowUserNamespaces lets the run create user namespaces, and so a
	// sandbox of its own inside troupe's (Codex sandboxes the commands it
	// runs with bubblewrap). Without it the seccomp filter refuses them:
	// a user namespace hands a run every capability over new namespaces,
	// kernel attack surface that no tool needs.
	AllowUserNamespaces bool
}

// Options configure a Sandbox.
type Options struct {
	// Driver is "auto" or "" (= "builtin"), "builtin" (the re-exec helper:
	// rlimits, Landlock, seccomp, namespaces) or "bwrap" (bubblewrap, which
	// must be installed, around the same helper).
	Driver string
	// Helper is an executable that runs HelperMain when its first argument
	// is HelperArg. "" means HelperName beside the running server's
	// executable when it is there and speaks this build's HelperProtocol,
	// else /proc/self/exe, the running server itself.
	Helper string
	// TempDir is where troupe's temp root (troupe-<uid>, mode 0700) is
	// made; runs' private temp dirs live in it; "" = os.TempDir(). Runs
	// never see the temp root, only their own dir in it.
	TempDir string
	// Hidden are further paths confined runs must not see, although they
	// may read the rest of the filesystem: the sessions' spool dir, the
	// audit log, the config file. A directory appears empty, a file as
	// /dev/null.
	Hidden []string
	// Logger receives probe results and cleanup trouble; nil discards.
	Logger *slog.Logger
	// Observer learns of every Start (metrics); nil: nobody.
	Observer StartObserver
}

// StartObserver learns how each Start went: how long it took the run to
// start, or why it did not (a *StartError; Stage "policy" when the profile
// cannot be enforced here). It must be quick and must not block.
type StartObserver interface {
	SandboxStarted(profile Profile, took time.Duration, err error)
}

// resolve returns the driver opts names ("" and "auto" mean builtin) and
// its logger (nil discards): what New checks on every platform.
func (o Options) resolve() (driver string, log *slog.Logger, err error) {
	switch o.Driver {
	case "", DriverAuto:
		driver = DriverBuiltin
	case DriverBuiltin, DriverBwrap:
		driver = o.Driver
	default:
		return "", nil, fmt.Errorf("unknown sandbox driver %q (want %q, %q or %q)", o.Driver, DriverAuto, DriverBuiltin, DriverBwrap)
	}
	log = o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return driver, log, nil
}

// Driver names.
const (
	DriverAuto    = "auto"
	DriverBuiltin = "builtin"
	DriverBwrap   = "bwrap"
)

// HelperArg is the first argument that turns the server binary into the
// sandbox helper: cmd/troupe's main calls HelperMain when os.Args[1] is it.
const HelperArg = "__sandbox"

// HelperName is the standalone helper (cmd/troupe-sandbox), looked for
// beside the server's executable. Every sandboxed run starts the helper,
// and a Go program's start-up grows with what it links: troupe's own
// binary (JSON Schema, HTTP, metrics) starts and exits about 6.5 ms later
// than /bin/true on the reference machine, the standalone helper about
// 0.7 ms later.
const HelperName = "troupe-sandbox"

// HelperProtocol is what a helper prints when probed. The server uses a
// standalone helper only when it prints exactly this, so a helper from
// another build, whose configuration format may differ, is never used.
// Change it whenever helperConfig or the helper's fd protocol changes.
const HelperProtocol = "troupe-sandbox/4"

// Isolation describes what the kernel (and the driver) can enforce here, as
// probed once by New.
type Isolation struct {
	Driver      string // DriverBuiltin or DriverBwrap
	OS          string // runtime.GOOS
	Root        bool   // the server runs as uid 0
	LandlockABI int    // 0: no Landlock
	Seccomp     bool   // seccomp filters can be installed (and the arch is supported)
	NetNS       bool   // runs without network get their own network namespace
	UserNS      bool   // unprivileged user namespaces work (matters when not root)
	PidsCgroup  string // "v1", "v2" or "": where per-run pids cgroups are made
	// MemoryCgroup is "v1" when per-run memory cgroups are made (else
	// MaxMemoryBytes is RLIMIT_AS).
	MemoryCgroup string
	// MountNS: runs get a mount namespace with everything read-only but
	// the workspace and their temp dir (metadata included), and troupe's
	// own files hidden. Without it, seccomp refuses metadata changes.
	MountNS bool
	// PidNS: runs without a pids cgroup get a PID namespace whose init is
	// the helper, so nothing they start outlives them.
	PidNS bool
	Bwrap string // bubblewrap's path when Driver is DriverBwrap and it works
	// Missing lists, for the log, what was probed and is not available,
	// each with the reason.
	Missing []string
}

// String is one log line, e.g. "landlock abi 7, seccomp, netns, pids cgroup
// v1, driver builtin".
func (i Isolation) String() string {
	var parts []string
	if i.OS != "" && i.OS != "linux" {
		parts = append(parts, i.OS+": no process sandbox")
	}
	if i.LandlockABI > 0 {
		parts = append(parts, fmt.Sprintf("landlock abi %d", i.LandlockABI))
	} else {
		parts = append(parts, "no landlock")
	}
	if i.Seccomp {
		parts = append(parts, "seccomp")
	} else {
		parts = append(parts, "no seccomp")
	}
	switch {
	case i.NetNS:
		parts = append(parts, "netns")
	case i.Seccomp:
		parts = append(parts, "no netns (network off by seccomp only)")
	default:
		parts = append(parts, "no netns")
	}
	if !i.Root {
		if i.UserNS {
			parts = append(parts, "userns")
		} else {
			parts = append(parts, "no userns")
		}
	}
	if i.MountNS {
		parts = append(parts, "mountns")
	} else {
		parts = append(parts, "no mountns (metadata changes off by seccomp)")
	}
	if i.MemoryCgroup != "" {
		parts = append(parts, "memory cgroup "+i.MemoryCgroup)
	} else {
		parts = append(parts, "no memory cgroup (RLIMIT_AS)")
	}
	switch {
	case i.PidsCgroup != "":
		parts = append(parts, "pids cgroup "+i.PidsCgroup)
	case i.PidNS:
		parts = append(parts, "no pids cgroup (pidns)")
	default:
		parts = append(parts, "no pids cgroup")
	}
	parts = append(parts, "driver "+i.Driver)
	return strings.Join(parts, ", ")
}

// UnenforceableError is Check's answer when a policy cannot be enforced
// here. The sandbox fails closed: a tool whose policy is unenforceable does
// not run. Reason says what is missing and how to fix it; it names no host
// paths.
type UnenforceableError struct {
	Profile Profile
	Reason  string
}

func (e *UnenforceableError) Error() string {
	return fmt.Sprintf("sandbox profile %q cannot be enforced here: %s", e.Profile, e.Reason)
}

// StartError is Start's error: the sandbox could not be set up or the
// program could not be executed. Error() is safe to show a client (no host
// paths); Err unwraps to the syscall errno for exec failures (ENOENT,
// EACCES, ENOEXEC), so callers can say "not found"; Stderr holds the
// helper's own diagnostics, which are for the server log and may name host
// paths.
type StartError struct {
	// Stage is where it failed: "policy", "command", "tempdir",
	// "runtime" (the files a read-only run's program needs to start could
	// not be worked out), "cgroup",
	// "start" (the helper or bwrap could not be started), "helper" (it
	// died before reporting), "rlimit", "capabilities", "landlock",
	// "seccomp", "cgroup-join" or "exec".
	Stage  string
	Err    error
	Stderr string
}

func (e *StartError) Error() string {
	return "sandbox: " + e.Stage + ": " + clientText(e.Err)
}

func (e *StartError) Unwrap() error { return e.Err }

// safeError is an error whose text we wrote ourselves and know to name no
// host path, so clientText may show it.
type safeError string

func (e safeError) Error() string { return string(e) }

// clientText renders err for a client: an errno's text, or our own
// path-free messages, never a *PathError's path.
func clientText(err error) string {
	var ue *UnenforceableError
	var se safeError
	var errno syscall.Errno
	switch {
	case err == nil:
		return "unknown error"
	case errors.As(err, &ue):
		return ue.Error()
	case errors.Is(err, exec.ErrNotFound):
		return "executable file not found in $PATH"
	case errors.Is(err, exec.ErrDot):
		return "executable resolves to the current directory (use ./name)"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.As(err, &se):
		return se.Error()
	case errors.As(err, &errno):
		return errno.Error()
	}
	return "setup failed (details in the server log)"
}

// checkCmd refuses what Start cannot take over: a command that already ran
// or whose SysProcAttr someone else set.
func checkCmd(cmd *exec.Cmd) *StartError {
	switch {
	case cmd == nil:
		return &StartError{Stage: "command", Err: safeError("no command")}
	case cmd.Process != nil:
		return &StartError{Stage: "command", Err: safeError("command already started")}
	case cmd.SysProcAttr != nil:
		return &StartError{Stage: "command", Err: safeError("command has SysProcAttr set; the sandbox owns it")}
	case cmd.Err != nil:
		// exec.Command's lookup failed. A program not on PATH also unwraps
		// to ENOENT, as an exec of a missing file would.
		if errors.Is(cmd.Err, exec.ErrNotFound) {
			return &StartError{Stage: "exec", Err: fmt.Errorf("%w: %w", cmd.Err, syscall.ENOENT)}
		}
		return &StartError{Stage: "exec", Err: cmd.Err}
	case cmd.Path == "":
		return &StartError{Stage: "command", Err: safeError("command has no path")}
	}
	return nil
}

// TempRoot is troupe's temp root in tempDir (os.TempDir() when ""):
// troupe-<uid>, where the sandbox makes each confined run's private temp
// dir. Runs never see it, only their own dir in it; troupe's own files
// (spool, audit log, config) must not lie in it.
func TempRoot(tempDir string) string {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	return filepath.Join(tempDir, fmt.Sprintf("troupe-%d", os.Getuid()))
}

// RunHelperIfAsked makes the running binary the sandbox's helper when it
// was started as one (its first argument is HelperArg): it runs HelperMain
// and exits with its result, and returns otherwise. Binaries that let the
// sandbox re-execute them as the helper (troupe's command, test binaries)
// call it first thing in main or TestMain.
func RunHelperIfAsked() {
	if len(os.Args) > 1 && os.Args[1] == HelperArg {
		os.Exit(HelperMain(os.Args[1:]))
	}
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
// Outside Linux only the none profile starts. Options.Observer learns how
// each start went.
func (s *Sandbox) Start(p Policy, cmd *exec.Cmd) (*Process, error) {
	began := time.Now()
	proc, err := s.start(p, cmd)
	if s.observer != nil {
		s.observer.SandboxStarted(p.Profile, time.Since(began), err)
	}
	return proc, err
}
