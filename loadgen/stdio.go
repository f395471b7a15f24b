package loadgen

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"troupe/sandbox"
)

// stdioServer is a server started as a child process, spoken to in
// newline-delimited JSON-RPC on its stdin and stdout. It runs as the
// leader of its own process group, which close kills.
type stdioServer struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	started time.Time

	wmu sync.Mutex
	w   *bufio.Writer

	mu      sync.Mutex
	pending map[int64]chan<- message

	dead    chan struct{} // closed when the read loop ends
	readErr error         // why; set before dead is closed
	exited  chan struct{} // closed when Wait has returned
}

// startStdio starts argv and its read loop.
func startStdio(argv []string, env []string, stderr io.Writer) (*stdioServer, error) {
	if len(argv) == 0 {
		return nil, errors.New("no command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stderr = stderr
	sandbox.NewSession(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &stdioServer{cmd: cmd, stdin: stdin, w: bufio.NewWriterSize(stdin, 64<<10),
		pending: map[int64]chan<- message{}, dead: make(chan struct{}), exited: make(chan struct{})}
	s.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go s.readLoop(stdout)
	go func() {
		<-s.dead
		_ = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

func (s *stdioServer) pid() int { return s.cmd.Process.Pid }

func (s *stdioServer) readLoop(stdout io.Reader) {
	r := bufio.NewReaderSize(stdout, 64<<10)
	var err error
	for {
		var line []byte
		line, err = r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: collect it whole (rare; results are small).
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 1 {
			s.dispatch(line)
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed its stdout")
	}
	s.readErr = err
	close(s.dead)
}

// dispatch hands an answer to its caller, and answers the server's own
// requests (ping) so that it never waits on us.
func (s *stdioServer) dispatch(line []byte) {
	m, err := parseMessage(line)
	if err != nil || !m.hasID && m.rawID == nil {
		return // not JSON, or a notification: ignored
	}
	if m.method != "" {
		reply := `{"jsonrpc":"2.0","id":` + string(m.rawID) + `,"result":{}}`
		if m.method != "ping" {
			reply = `{"jsonrpc":"2.0","id":` + string(m.rawID) + `,"error":{"code":-32601,"message":"troupe bench answers only ping"}}`
		}
		_ = s.write([]byte(reply))
		return
	}
	s.mu.Lock()
	ch, ok := s.pending[m.id]
	delete(s.pending, m.id)
	s.mu.Unlock()
	if ok {
		if m.result != nil {
			m.result = append([]byte(nil), m.result...) // the line buffer is reused
		}
		m.rawID = nil
		ch <- m
	}
}

// write sends one line.
func (s *stdioServer) write(line []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if _, err := s.w.Write(line); err != nil {
		return err
	}
	if err := s.w.WriteByte('\n'); err != nil {
		return err
	}
	return s.w.Flush()
}

func (s *stdioServer) roundTrip(ctx context.Context, c *caller, id int64, req []byte) (string, string) {
	m, kind := s.exchange(ctx, c, id, req)
	if kind != "" {
		return kind, ""
	}
	return m.kind, m.failure()
}

// exchange sends req and waits for the message answering id.
func (s *stdioServer) exchange(ctx context.Context, c *caller, id int64, req []byte) (message, string) {
	s.mu.Lock()
	s.pending[id] = c.ch
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		select { // an answer that raced the forgetting
		case <-c.ch:
		default:
		}
	}
	if err := s.write(req); err != nil {
		forget()
		return message{}, KindTransport
	}
	c.timer.Reset(c.timeout)
	defer c.timer.Stop()
	select {
	case m := <-c.ch:
		return m, ""
	case <-c.timer.C:
		forget()
		return message{}, KindTimeout
	case <-s.dead:
		forget()
		return message{}, KindTransport
	case <-ctx.Done():
		forget()
		return message{}, KindTimeout
	}
}

// initialize performs the handshake and returns the time from the
// process's start to the initialize answer.
func (s *stdioServer) initialize(ctx context.Context, version string, timeout time.Duration) (time.Duration, error) {
	c := newCaller(timeout)
	m, kind := s.exchange(ctx, c, 0, initializeRequest(0, version))
	took := time.Since(s.started)
	switch {
	case kind == KindTransport:
		select {
		case <-s.dead: // readErr is set
			return 0, fmt.Errorf("initialize: %v", s.readErr)
		default:
			return 0, errors.New("initialize: the server's stdin is closed")
		}
	case kind != "":
		return 0, fmt.Errorf("initialize: no answer (%s)", kind)
	case m.kind != "":
		return 0, fmt.Errorf("initialize failed: %s %s", m.kind, m.errText)
	}
	if err := s.write(initializedNotification); err != nil {
		return 0, fmt.Errorf("notifications/initialized: %w", err)
	}
	return took, nil
}

// close ends the server: stdin is closed so that it can exit on its own,
// then, after grace, its whole process group is killed. It waits for the
// process to be reaped.
func (s *stdioServer) close(grace time.Duration) {
	s.wmu.Lock()
	_ = s.stdin.Close()
	s.wmu.Unlock()
	select {
	case <-s.exited:
	case <-time.After(grace):
	}
	// The leader may be gone while its children live on: the group is
	// killed either way.
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.exited
}
