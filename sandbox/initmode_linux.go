package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Init mode: how a run without a pids cgroup still ends whole.
//
// A pids cgroup lets Kill find every process of a run, including one that
// left the process group (setsid) or was orphaned by a double fork. A
// server that cannot make one (not root, no delegated cgroup) puts the run
// in a PID namespace of its own instead, inside the run's user namespace.
// The helper unshares it while it still has its capabilities there, so its
// next child is the namespace's init: the helper binary again, in "init"
// mode, which starts the target as its child and reaps orphans until the
// target exits. When init exits or is killed (the runner's SIGKILL to the
// group, or the helper's death through the parent-death signal), the kernel
// kills every process left in the namespace, however it detached itself.
//
// Why two processes: init cannot die of a signal it sends itself, so it
// could only report the target's death by a signal as an exit code; the
// helper outside the namespace can, and re-enacts the target's end (exit
// code or signal) from the wait status init passes it, so the runner sees
// exactly what the target did. And the setup (Landlock's all-threads
// calls) stays out of a namespace's init, where signals behave differently.
//
// Both ignore the signals the runner sends the group (the target, in the
// same group, gets them; init would otherwise end the namespace at once,
// without the grace period), through handlers, not SIG_IGN, which the
// target would inherit across exec.

// initArg is the helper's argument for init mode:
// HELPER HelperArg initArg <config fd> <status fd> <result fd>.
const initArg = "init"

// initConfig is what the helper tells init over its config pipe.
type initConfig struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
	// Files is how many fds (0, 1, 2 and the caller's ExtraFiles) the
	// target inherits.
	Files int `json:"files"`
}

// ignoreRunnerSignals keeps the signals a runner sends a process group
// from ending this process; they are handled (and dropped), so an exec'd
// child starts with their default actions.
func ignoreRunnerSignals() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM)
	go func() { // ends with the process
		for range sigs {
		}
	}()
}

// runWithInit is the helper's last step in init mode: the sandbox is in
// place and the PID namespace unshared. It starts init (this binary again)
// with the target's config, waits for it, and ends as the target did.
func (h helper) runWithInit(cfg helperConfig, args []string) int {
	ignoreRunnerSignals()
	data, err := json.Marshal(initConfig{Path: cfg.Path, Args: args, Env: cfg.Env, Files: cfg.FirstPrivateFD})
	if err != nil {
		return h.fail("init", err, exitSetup)
	}
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return h.fail("init", err, exitSetup)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		return h.fail("init", err, exitSetup)
	}
	// init's fds: the target's (0 .. Files-1), then its config, the
	// status pipe (for exec failures) and the result pipe.
	files := make([]uintptr, cfg.FirstPrivateFD, cfg.FirstPrivateFD+3)
	for i := range files {
		files[i] = uintptr(i)
	}
	first := len(files)
	files = append(files, cfgR.Fd(), uintptr(h.status), resW.Fd())
	dir, _ := os.Getwd()
	self, err := os.Executable()
	if err != nil {
		self = selfExe
	}
	initArgs := []string{HelperName, HelperArg, initArg, strconv.Itoa(first), strconv.Itoa(first + 1), strconv.Itoa(first + 2)}
	pid, err := syscall.ForkExec(self, initArgs, &syscall.ProcAttr{
		Dir: dir, Env: helperEnv(), Files: files,
		// The helper's death (the runner's SIGKILL) ends init, and so the
		// namespace.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	cfgR.Close()
	resW.Close()
	if err != nil {
		return h.fail("init", fmt.Errorf("start init: %w", err), exitSetup)
	}
	// init reports an exec failure itself; our copy of the status pipe
	// goes, so the server reads EOF once the target runs.
	unix.Close(h.status)
	_, _ = cfgW.Write(data)
	cfgW.Close()
	var raw [4]byte
	_, rerr := io.ReadFull(resR, raw[:])
	resR.Close()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if rerr != nil {
		// init ended without a result: it failed (and said why on the
		// status pipe) or was killed.
		if ws.Signaled() {
			dieOf(ws.Signal())
		}
		return ws.ExitStatus()
	}
	target := syscall.WaitStatus(binary.LittleEndian.Uint32(raw[:]))
	if target.Signaled() {
		dieOf(target.Signal())
		return 128 + int(target.Signal())
	}
	return target.ExitStatus()
}

// dieOf ends this process by sig, as the target ended.
func dieOf(sig syscall.Signal) {
	signal.Reset(sig)
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) // no core of the helper
	_ = syscall.Kill(os.Getpid(), sig)
	// A signal that does not kill (SIGCHLD, ...) cannot have killed the
	// target either; fall through to the exit code.
}

// initMain is init: the first process of the run's PID namespace. It reads
// the target's config, starts it, reaps every process that ends in the
// namespace, and when the target ends passes its wait status to the
// helper and exits, which ends the namespace.
func initMain(args []string) int {
	if len(args) != 3 {
		fmt.Fprintln(os.Stderr, "sandbox init: want <config fd> <status fd> <result fd>")
		return exitSetup
	}
	var fds [3]int
	for i, a := range args {
		fd, err := strconv.Atoi(a)
		if err != nil || fd < 3 {
			fmt.Fprintln(os.Stderr, "sandbox init: bad fd arguments")
			return exitSetup
		}
		fds[i] = fd
		unix.CloseOnExec(fd)
	}
	h := helper{status: fds[1]}
	ignoreRunnerSignals()
	f := os.NewFile(uintptr(fds[0]), "init-config")
	data, err := io.ReadAll(f)
	f.Close()
	var cfg initConfig
	if err == nil {
		err = json.Unmarshal(data, &cfg)
	}
	if err != nil {
		return h.fail("init", fmt.Errorf("init config: %w", err), exitSetup)
	}
	// Only the target's own fds pass on, whatever init's runtime opened.
	if err := closeOnExecFrom(cfg.Files); err != nil {
		return h.fail("init", err, exitSetup)
	}
	ws, code, ok := h.startAndReap(cfg.Path, cfg.Args, cfg.Env, cfg.Files, "sandbox init")
	if !ok {
		return code
	}
	var raw [4]byte
	binary.LittleEndian.PutUint32(raw[:], uint32(ws))
	_, _ = unix.Write(fds[2], raw[:])
	return 0
}

// runAsReaper is the helper's last step when it was started as the first
// process of the run's PID namespace (Policy.AllowUserNamespaces: the
// fresh /proc it mounted shows that namespace). The sandbox is in place;
// it starts the target as its child, reaps every process that ends in the
// namespace and, when the target ends, exits, which ends the namespace.
// A namespace's first process cannot die of a signal it sends itself, so
// a target killed by a signal is reported as exit code 128+signal.
func (h helper) runAsReaper(cfg helperConfig, args []string) int {
	ignoreRunnerSignals()
	ws, code, ok := h.startAndReap(cfg.Path, args, cfg.Env, cfg.FirstPrivateFD, "sandbox helper")
	if !ok {
		return code
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// startAndReap starts the target as this process's child with fds 0 to
// files-1, closes the status pipe (the target runs: the server reads EOF)
// and reaps every child until the target ends. It returns the target's
// status, or false and the helper's exit code when it could not start or
// be waited for (who names this process in the message).
func (h helper) startAndReap(path string, args, env []string, files int, who string) (syscall.WaitStatus, int, bool) {
	fds := make([]uintptr, files)
	for i := range fds {
		fds[i] = uintptr(i)
	}
	dir, _ := os.Getwd()
	pid, err := syscall.ForkExec(path, args, &syscall.ProcAttr{Dir: dir, Env: env, Files: fds})
	if err != nil {
		code := exitNoExec
		if errors.Is(err, syscall.ENOENT) {
			code = exitNotFound
		}
		return 0, h.fail("exec", err, code), false
	}
	unix.Close(h.status)
	ws, err := reapUntil(pid)
	if err != nil {
		fmt.Fprintln(os.Stderr, who+": wait:", err)
		return 0, exitSetup, false
	}
	return ws, 0, true
}

// reapUntil reaps the children of this process (a PID namespace's first,
// which orphans are given to) until pid ends, and returns pid's status.
func reapUntil(pid int) (syscall.WaitStatus, error) {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return 0, err
		case got != pid || !(ws.Exited() || ws.Signaled()):
			continue // an orphan of the run, reaped
		}
		return ws, nil
	}
}
