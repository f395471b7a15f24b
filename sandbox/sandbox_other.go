//go:build !linux

package sandbox

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
)

// Sandbox starts processes under a Policy. Outside Linux only ProfileNone
// can be enforced: Check refuses the default profile, and the seatbelt
// profile (macOS sandbox-exec) is not implemented yet.
type Sandbox struct {
	log      *slog.Logger
	iso      Isolation
	observer StartObserver // Options.Observer; nil: none
}

// New validates opts; there is nothing to probe outside Linux.
func New(opts Options) (*Sandbox, error) {
	driver, log, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return &Sandbox{log: log, observer: opts.Observer, iso: Isolation{Driver: driver, OS: runtime.GOOS, Root: os.Getuid() == 0}}, nil
}

// TempRoot is for confined runs, which only Linux has.
func (s *Sandbox) TempRoot() (string, error) {
	return "", fmt.Errorf("no temp root outside Linux: confined runs are not implemented on %s", runtime.GOOS)
}

// Isolation describes what is enforceable here: nothing beyond a process
// group.
func (s *Sandbox) Isolation() Isolation { return s.iso }

// Check accepts ProfileNone and refuses the confining profiles.
func (s *Sandbox) Check(p Policy) error {
	const orNone = `set sandbox_profile = "none" for this tool`
	if p.ReadOnlyWorkspace {
		return &UnenforceableError{Profile: p.Profile, Reason: "a read-only workspace run needs Landlock, which only Linux has"}
	}
	switch p.Profile {
	case ProfileNone:
		return nil
	case ProfileSeatbelt:
		if runtime.GOOS == "darwin" {
			return &UnenforceableError{Profile: p.Profile, Reason: "the seatbelt profile (macOS sandbox-exec) is not implemented yet; " + orNone}
		}
		return &UnenforceableError{Profile: p.Profile, Reason: "the seatbelt profile is for macOS (on Linux it means default); " + orNone}
	case "", ProfileDefault:
		return &UnenforceableError{Profile: ProfileDefault, Reason: "process sandboxing is only implemented on Linux; " + orNone}
	}
	return &UnenforceableError{Profile: p.Profile, Reason: "unknown profile"}
}

// start is Start outside Linux: cmd in its own process group (ProfileNone only).
func (s *Sandbox) start(p Policy, cmd *exec.Cmd) (*Process, error) {
	if err := checkCmd(cmd); err != nil {
		return nil, err
	}
	if err := s.Check(p); err != nil {
		return nil, &StartError{Stage: "policy", Err: err}
	}
	if err := setGroup(cmd); err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	if err := cmd.Start(); err != nil {
		return nil, &StartError{Stage: "start", Err: err}
	}
	return &Process{pid: cmd.Process.Pid}, nil
}

// Process is one started run.
type Process struct {
	pid      int
	mu       sync.Mutex
	released bool
}

// Pid is the process id, also the process group id.
func (p *Process) Pid() int { return p.pid }

// Kill sends SIGKILL to the process group; after Release it does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		killGroup(p.pid)
	}
}

// Release kills what is left of the process group. Idempotent.
func (p *Process) Release() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.released {
		p.released = true
		killGroup(p.pid)
	}
	return nil
}

// HelperMain exists so that main compiles everywhere; outside Linux there
// is no helper.
func HelperMain(args []string) int {
	fmt.Fprintln(os.Stderr, "sandbox helper: process sandboxing is only implemented on Linux")
	return 125
}

// ProtectProcess does nothing outside Linux.
func ProtectProcess() error { return nil }
