package command

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"troupe/observe/tracing"
	"troupe/sandbox"
)

// DefaultKillGrace is how long a stopped program's process group has
// between SIGTERM and SIGKILL when Definition.KillGrace is zero.
const DefaultKillGrace = 2 * time.Second

// drainDelay bounds the wait for the output pipes once the process group
// is gone. Only a process that left the group (setsid, setpgid) can still
// hold them then; after drainDelay the pipes are closed under it.
const drainDelay = 500 * time.Millisecond

// run is one execution of the program, fully resolved.
type run struct {
	path    string   // the program file
	argv    []string // argv[0] is the command as configured
	dir     string
	env     []string
	stdin   []byte
	timeout time.Duration
	grace   time.Duration
	stream  *streamer // nil unless the tool streams and someone listens
	// stdout and stderr receive the program's output (the call's spool,
	// through a redacting writer); they must not block for long.
	stdout, stderr io.Writer
	// sandbox starts the program under policy; nil starts it directly
	// (profile "none"), still as the leader of its own process group.
	sandbox *sandbox.Sandbox
	policy  sandbox.Policy
}

// runResult is what a finished run leaves.
type runResult struct {
	state    *os.ProcessState
	stopped  bool // SIGTERM was sent (timeout or cancellation) before the program exited
	duration time.Duration
}

// startError is the failure of a program to start.
type startError struct{ err error }

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// exec runs the program to its end and returns what it left. Every way out
// has killed the whole process group and reaped the program: no process,
// goroutine or descriptor of the run outlives it (except processes that
// left the group on their own; their pipes are closed after drainDelay).
//
// The order of events:
//
//  1. The program starts as the leader of a new process group, its
//     stdout and stderr on pipes this run reads itself (so it sees their
//     end), its stdin fed by exec.Cmd from the arguments.
//  2. When ctx is done or the timeout passes, exec.Cmd calls Cancel,
//     which sends SIGTERM to the group and arms a timer that sends
//     SIGKILL to the group after the grace period.
//  3. awaitExit learns that the leader has exited without reaping it.
//     If the run was stopped, it waits for the rest of the group to
//     close the output pipes, at most until the grace period ends.
//  4. SIGKILL goes to the group, which takes whatever the program left
//     running; then no more signals are sent, and Wait reaps the leader.
//  5. The pipe readers finish (or are cut off after drainDelay).
func (r *run) exec(ctx context.Context) (*runResult, error) {
	runCtx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()

	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}

	cmd := exec.CommandContext(runCtx, r.path, r.argv[1:]...)
	cmd.Args[0] = r.argv[0]
	cmd.Dir = r.dir
	cmd.Env = r.env
	cmd.Stdin = bytes.NewReader(r.stdin)
	cmd.Stdout, cmd.Stderr = outW, errW
	g := &group{grace: r.grace, graceOver: make(chan struct{})}
	cmd.Cancel = func() error { return g.terminate(cmd.Process.Pid) }
	// Wait is only called once the leader has exited and the group is
	// killed; WaitDelay then bounds the stdin copy, should a process that
	// left the group hold stdin without reading. It must not be shorter
	// than the grace period: exec.Cmd kills the leader itself when it
	// runs out after a cancellation.
	cmd.WaitDelay = r.grace + drainDelay

	started := time.Now()
	var proc *sandbox.Process
	if r.sandbox != nil {
		_, span := tracing.Child(ctx, "sandbox.start", trace.SpanKindInternal,
			tracing.SandboxProfileKey.String(string(r.policy.Profile)))
		proc, err = r.sandbox.Start(r.policy, cmd)
		sandboxStartSpanEnd(span, err)
	} else {
		sandbox.NewSession(cmd)
		err = cmd.Start()
	}
	outW.Close() // the child holds its own copies now
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if runCtx.Err() != nil { // a timeout too short to start anything
			return &runResult{stopped: true}, nil
		}
		return nil, &startError{err}
	}
	pid := cmd.Process.Pid
	g.setProcess(proc)

	res := &runResult{}
	var readers sync.WaitGroup
	readers.Add(2)
	go r.read(ctx, &readers, outR, r.stdout, stdoutStream)
	go r.read(ctx, &readers, errR, r.stderr, stderrStream)
	readersDone := make(chan struct{})
	go func() {
		readers.Wait()
		close(readersDone)
	}()

	// awaitExit fails only if the leader is not our child any more, which
	// cannot happen before Wait; the kill and Wait below still hold.
	_ = sandbox.AwaitExit(pid)
	if g.leaderExited(pid) {
		select {
		case <-readersDone:
		case <-g.graceOver:
		}
	}
	g.kill()
	waitErr := cmd.Wait()
	if proc != nil {
		// Kills whatever left the group but not the run's cgroup, and
		// removes the private temp dir.
		if err := proc.Release(); err != nil && waitErr == nil {
			waitErr = err
		}
	}

	drain := time.NewTimer(drainDelay)
	select {
	case <-readersDone:
	case <-drain.C:
		outR.Close()
		errR.Close()
		<-readersDone
	}
	drain.Stop()
	outR.Close()
	errR.Close()

	res.duration = time.Since(started)
	res.stopped = g.stopped()
	res.state = cmd.ProcessState
	if res.state == nil {
		return nil, fmt.Errorf("waiting for the program: %w", waitErr)
	}
	return res, nil
}

// read copies one output pipe into its writer (and the streamer) until
// the pipe ends or is closed. While the streamer's queue is full (the
// client is slow), read waits, and the program blocks on a full pipe.
func (r *run) read(ctx context.Context, wg *sync.WaitGroup, f *os.File, w io.Writer, stream int) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n]) // spool writers do not fail
			if r.stream != nil {
				r.stream.write(ctx, stream, buf[:n])
			}
		}
		if err != nil {
			if r.stream != nil {
				r.stream.closeStream(stream)
			}
			return
		}
	}
}

// group is the process group of one run; the program leads it, so its
// pid is the group id.
type group struct {
	grace     time.Duration
	graceOver chan struct{} // closed when SIGKILL has followed SIGTERM

	proc *sandbox.Process // nil when started without the sandbox

	mu         sync.Mutex
	pid        int
	exited     bool // the leader has exited (it is not reaped yet)
	terminated bool // SIGTERM was sent while the leader ran
	done       bool // no more signals: the leader is about to be reaped
	timer      *time.Timer
}

// terminate is exec.Cmd.Cancel: SIGTERM to the group now, SIGKILL after
// the grace period. os.ErrProcessDone tells exec.Cmd there was nothing
// left to stop.
func (g *group) terminate(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.exited || g.done || g.timer != nil {
		return os.ErrProcessDone
	}
	g.pid, g.terminated = pid, true
	signalGroup(pid, syscall.SIGTERM)
	g.timer = time.AfterFunc(g.grace, func() {
		g.mu.Lock()
		if !g.done {
			signalGroup(g.pid, syscall.SIGKILL)
			if g.proc != nil {
				g.proc.Kill()
			}
		}
		g.mu.Unlock()
		close(g.graceOver)
	})
	return nil
}

// setProcess records the sandboxed process, whose Kill also reaches
// members of its cgroup that left the group.
func (g *group) setProcess(p *sandbox.Process) {
	g.mu.Lock()
	g.proc = p
	g.mu.Unlock()
}

// leaderExited records that the leader has exited and reports whether the
// run was being stopped.
func (g *group) leaderExited(pid int) (stopping bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pid, g.exited = pid, true
	return g.terminated
}

// kill sends SIGKILL to the whole group, the last signal it gets. The
// leader is a zombie until Wait reaps it, so the group id still names
// this group.
func (g *group) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	signalGroup(g.pid, syscall.SIGKILL)
	if g.proc != nil {
		g.proc.Kill()
	}
	g.done = true
	if g.timer != nil {
		g.timer.Stop()
	}
}

func (g *group) stopped() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.terminated
}

// signalGroup signals every process of the group pid leads. An empty
// group (ESRCH) is no error.
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 1 { // never -1 (every process) nor -0 (our own group)
		_ = syscall.Kill(-pid, sig)
	}
}

// sandboxStartSpanEnd ends the span of a sandbox start: a failed start is
// marked with its stage ("policy": refused as unenforceable, "landlock",
// …), never its message.
func sandboxStartSpanEnd(span trace.Span, err error) {
	var se *sandbox.StartError
	switch {
	case err == nil:
	case errors.As(err, &se):
		tracing.Fail(span, err, "the sandbox could not start the process", se.Stage)
	default:
		tracing.Fail(span, err, "the sandbox could not start the process", "")
	}
	span.End()
}
