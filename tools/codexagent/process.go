package codexagent

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"troupe/sandbox"
)

// killGrace is how long Codex has between SIGTERM and SIGKILL, and how
// long it has to exit on its own once its stdin is closed.
const killGrace = 2 * time.Second

// process is one `codex app-server`, started in troupe's sandbox: the
// leader of its own process group, stdin and stdout as the JSON-RPC
// channel, stderr kept (bounded) for error messages.
type process struct {
	cmd    *exec.Cmd
	run    *sandbox.Process
	stdin  io.WriteCloser
	stdout *os.File // read end; closed by stop
	stderr *tailBuffer
	exited chan struct{} // closed when the leader has exited (not reaped)

	stopOnce sync.Once
}

// startProcess starts argv with env in dir under policy pol of sb.
func startProcess(sb *sandbox.Sandbox, pol sandbox.Policy, argv []string, dir string, env []string) (*process, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = outW
	p := &process{cmd: cmd, stdout: outR, stderr: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	// Bounds Wait's copy of stderr should an escaped grandchild hold it.
	cmd.WaitDelay = 500 * time.Millisecond
	stdin, err := cmd.StdinPipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	p.stdin = stdin
	p.run, err = sb.Start(pol, cmd)
	outW.Close() // the child holds its own copy
	if err != nil {
		stdin.Close()
		outR.Close()
		return nil, err
	}
	pid := cmd.Process.Pid
	go func() {
		// Fails only if pid is not our child any more, which cannot
		// happen before Wait; either way the leader is gone or stop's
		// Kill and Wait still hold.
		_ = sandbox.AwaitExit(pid)
		close(p.exited)
	}()
	return p, nil
}

// stop ends the process and everything in its group, then reaps it. With
// graceful set it first closes stdin and waits killGrace for Codex to exit
// by itself (the normal end of a call); then SIGTERM, killGrace, SIGKILL.
// It returns once the leader is reaped and stdout is closed; it is safe to
// call more than once.
func (p *process) stop(graceful bool) {
	p.stopOnce.Do(func() {
		p.stdin.Close()
		pgid := p.cmd.Process.Pid
		wait := func() bool {
			t := time.NewTimer(killGrace)
			defer t.Stop()
			select {
			case <-p.exited:
				return true
			case <-t.C:
				return false
			}
		}
		if !graceful || !wait() {
			signalGroup(pgid, syscall.SIGTERM)
			if !wait() {
				signalGroup(pgid, syscall.SIGKILL)
				<-p.exited
			}
		}
		// The leader is a zombie until Wait reaps it, so its pid still
		// names this group; the sandbox's Kill also ends what left the
		// group (setsid) through the run's cgroup or PID namespace:
		// whatever Codex left running (shells, MCP servers) dies here.
		p.run.Kill()
		_ = p.cmd.Wait()
		_ = p.run.Release()
		p.stdout.Close()
	})
}

// signalGroup signals every process of the group pid leads; an empty
// group is no error.
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 1 { // never -1 (every process) nor -0 (our own group)
		_ = syscall.Kill(-pid, sig)
	}
}

// tailBuffer keeps the last max bytes written to it: Codex's stderr, for
// error messages, without growing with a chatty process.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

// String returns the kept text without Codex's harmless start-up
// warnings, trimmed.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var keep [][]byte
	for _, line := range bytes.Split(t.buf, []byte("\n")) {
		if bytes.HasPrefix(line, []byte("WARNING: proceeding, even though we could not create PATH aliases")) {
			continue
		}
		keep = append(keep, line)
	}
	return string(bytes.TrimSpace(bytes.Join(keep, []byte("\n"))))
}
