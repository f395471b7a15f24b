package downstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol/framing"

	"troupe/sandbox"
)

// Timings of a stdio server's end.
const (
	// killGrace is how long a server has between SIGTERM and SIGKILL on
	// Close.
	killGrace = 2 * time.Second
	// exitReasonWait is how long a closed stdout waits for the process's
	// exit status, which makes a better reason than "stdout closed".
	exitReasonWait = 100 * time.Millisecond
	// stderrWait is how long an exited server's stderr may take to reach
	// its end, so its last lines are in the exit error (a grandchild that
	// keeps the pipe open costs this once).
	stderrWait = 200 * time.Millisecond
	// pipeGrace is how long the pipes may stay open after the process has
	// exited (a grandchild that left the process group can hold them)
	// before they are closed under their readers.
	pipeGrace = 500 * time.Millisecond
	// maxStderrLine bounds one logged stderr line; the rest is dropped.
	maxStderrLine = 4 << 10
)

// stdioTransport runs a server as a child process and speaks newline
// delimited JSON-RPC on its stdin and stdout, through jsonrpc2.Conn over
// framing.Stream (one line, one message: a bad line costs one message,
// never the stream).
type stdioTransport struct {
	c    *Client
	cmd  *exec.Cmd
	pid  int
	kill func()

	stdin  *os.File // our end of the child's stdin
	stdout *os.File // our end of its stdout
	stderr *os.File // our end of its stderr
	lines  *lineStream
	conn   *jsonrpc2.Conn

	// procMu orders signals against reaping: while the leader is not yet
	// reaped its pid (and so the group id) cannot be reused, so a signal
	// sent under procMu with reaped false reaches only our processes.
	procMu  sync.Mutex
	reaped  bool
	exited  chan struct{} // closed once the leader is reaped
	exitErr error         // cmd.Wait's answer; read after exited

	stderrDone chan struct{}
	tail       stderrTail // the last lines of stderr, for the exit error

	closing   chan struct{} // closed by shutdown
	closeOnce sync.Once
	abort     atomic.Bool // shutdown without the SIGTERM grace

	wg sync.WaitGroup // waiter, supervisor, stderr reader, line pump
}

func startStdio(c *Client, cfg Config) (*stdioTransport, error) {
	path, err := lookPath(cfg.Command, cfg.Env["PATH"], cfg.Cwd)
	if err != nil {
		return nil, err
	}
	var files []*os.File // every pipe end, closed on failure
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		if r, w, err = os.Pipe(); err == nil {
			files = append(files, r, w)
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if err != nil {
		closeAll(files)
		return nil, fmt.Errorf("making pipes: %w", err)
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   append([]string{cfg.Command}, cfg.Args...),
		Dir:    cfg.Cwd,
		Env:    environ(cfg.Env),
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
	}
	kill, err := start(cmd, cfg.Start)
	// The child has its own copies of its ends (or failed to start).
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		closeAll([]*os.File{inW, outR, errR})
		return nil, fmt.Errorf("starting %s: %w", cfg.Command, err)
	}
	s := &stdioTransport{
		c: c, cmd: cmd, pid: cmd.Process.Pid, kill: kill,
		stdin: inW, stdout: outR, stderr: errR,
		exited:     make(chan struct{}),
		stderrDone: make(chan struct{}),
		closing:    make(chan struct{}),
		tail:       stderrTail{mask: cfg.Redact.Replace},
	}
	s.c.log.Debug("upstream: started", "pid", s.pid)
	s.wg.Go(s.wait)
	s.wg.Go(s.readStderr)
	// A downstream server's messages are its own to shape; troupe passes its
	// results on as they came (the duplicate-member check is for clients).
	// Its messages are bounded as HTTP answers are (maxJSONBody), not as
	// a client's: a page of 100,000 resources must come through, and a
	// line over the bound is dropped, its request failing at its deadline.
	fs := framing.New(outR, inW, framing.Options{Logger: c.log, AllowDuplicateMembers: true, MaxLineBytes: maxJSONBody})
	s.lines = newLineStream(fs, &s.wg)
	s.conn = jsonrpc2.NewConn(context.Background(), s.lines, stdioHandler{s},
		jsonrpc2.SetLogger(jsonrpcLogger{c}))
	s.wg.Go(s.supervise)
	return s, nil
}

// start starts cmd with the configured starter, or as the leader of a new
// process group.
func start(cmd *exec.Cmd, starter func(*exec.Cmd) (func(), error)) (func(), error) {
	if starter != nil {
		kill, err := starter(cmd)
		if err == nil && kill == nil {
			pid := cmd.Process.Pid
			kill = func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }
		}
		return kill, err
	}
	sandbox.NewSession(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	return func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// environ renders the child's complete environment, sorted; never nil,
// since a nil Env would make exec inherit troupe's.
func environ(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// lookPath finds a bare command name on the child's PATH. A name with a
// slash is used as is (exec resolves a relative one against the working
// directory).
func lookPath(name, path, cwd string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		probe := p
		if !filepath.IsAbs(p) && cwd != "" {
			probe = filepath.Join(cwd, p)
		}
		if fi, err := os.Stat(probe); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			if !filepath.IsAbs(p) && !strings.Contains(p, "/") {
				p = "./" + p
			}
			return p, nil
		}
	}
	return "", fmt.Errorf("command %q not found on the PATH of its environment", name)
}

// wait reaps the leader. On Linux it first waits without reaping and kills
// what is left of the group while the zombie pins the group id, so a
// server's helpers do not outlive it and the signal cannot reach a
// stranger.
func (s *stdioTransport) wait() {
	pinned := awaitExit(s.pid) == nil
	s.procMu.Lock()
	if pinned {
		s.kill()
	}
	s.exitErr = s.cmd.Wait()
	s.reaped = true
	s.procMu.Unlock()
	if !pinned {
		s.kill() // best effort where the zombie cannot be kept
	}
	close(s.exited)
}

// signal sends sig to the process group unless the leader is reaped.
func (s *stdioTransport) signal(sig syscall.Signal) {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	if s.reaped {
		return
	}
	if sig == syscall.SIGKILL {
		s.kill()
		return
	}
	if syscall.Kill(-s.pid, sig) != nil {
		_ = syscall.Kill(s.pid, sig)
	}
}

// supervise owns the connection's end: it waits for the process to exit,
// stdout to close or shutdown, reports the loss, and tears everything down
// in order.
func (s *stdioTransport) supervise() {
	graceful := false
	select {
	case <-s.exited:
		s.c.lost(s.exitReason())
	case <-s.conn.DisconnectNotify():
		select {
		case <-s.exited:
			s.c.lost(s.exitReason())
		case <-time.After(exitReasonWait):
			s.c.lost(errors.New("the server closed its stdout"))
		}
	case <-s.closing:
		graceful = !s.abort.Load()
	}
	// EOF on stdin is MCP's polite "please exit". Closing the file itself
	// (not through the framing stream, whose lock a blocked write may
	// hold) also unblocks such a write.
	s.stdin.Close()
	if graceful {
		s.signal(syscall.SIGTERM)
		t := time.NewTimer(killGrace)
		select {
		case <-s.exited:
		case <-t.C:
		}
		t.Stop()
	}
	s.signal(syscall.SIGKILL)
	<-s.exited
	t := time.NewTimer(pipeGrace)
	select {
	case <-s.lines.pumpDone:
	case <-t.C:
	}
	select {
	case <-s.stderrDone:
	case <-t.C:
	}
	t.Stop()
	s.stdout.Close()
	s.stderr.Close()
	s.conn.Close()
}

// exitReason is why the connection ended once the process has: its exit
// status or signal and the last lines of its stderr (*ExitError), after
// waiting a little for the stderr pipe to end so those lines are all
// there.
func (s *stdioTransport) exitReason() error {
	t := time.NewTimer(stderrWait)
	select {
	case <-s.stderrDone:
	case <-t.C:
	}
	t.Stop()
	return exitError(s.exitErr, s.tail.last())
}

// readStderr logs the child's stderr line by line at debug level: MCP
// lets servers write anything there, and none of it is an error signal.
// It keeps the last lines (s.tail): when the server exits, they usually
// say why.
func (s *stdioTransport) readStderr() {
	defer close(s.stderrDone)
	r := bufio.NewReaderSize(s.stderr, maxStderrLine)
	for {
		line, err := r.ReadSlice('\n')
		cut := errors.Is(err, bufio.ErrBufferFull)
		if text := strings.TrimRight(string(line), "\r\n"); text != "" || cut {
			if cut {
				text += "…"
			}
			s.c.log.Debug("upstream: stderr", "line", text)
			s.tail.add(text)
		}
		for cut { // drop the rest of an overlong line
			_, err = r.ReadSlice('\n')
			cut = errors.Is(err, bufio.ErrBufferFull)
		}
		if err != nil {
			return
		}
	}
}

func (s *stdioTransport) call(ctx context.Context, id int64, method string, params json.RawMessage, _ *flight) (json.RawMessage, error) {
	var p any // a nil RawMessage in an interface would be sent as "params":null
	if params != nil {
		p = params
	}
	w, err := s.conn.DispatchCall(ctx, method, p, jsonrpc2.PickID(jsonrpc2.ID{Num: uint64(id)}))
	if err != nil {
		// EPIPE: the server exited before the request was written.
		if errors.Is(err, jsonrpc2.ErrClosed) || errors.Is(err, syscall.EPIPE) || s.c.life.Err() != nil {
			return nil, s.lostErr(ctx)
		}
		return nil, err
	}
	// Wait ends with ctx or the connection's close; the connection is
	// closed only after the teardown, so the life context makes a lost
	// connection fail the call at once.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(s.c.life, cancel)()
	var res json.RawMessage
	err = w.Wait(wctx, &res)
	var rpcErr *jsonrpc2.Error
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &rpcErr):
		e := &RPCError{Code: rpcErr.Code, Message: rpcErr.Message}
		if rpcErr.Data != nil {
			e.Data = *rpcErr.Data
		}
		return nil, e
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	return nil, s.lostErr(ctx)
}

// lostErr is the error of a call the lost connection ended. jsonrpc2 sees
// stdout close before supervise has the exit status, so it waits (within
// ctx, at most exitReasonWait plus stderrWait) for supervise to record
// why: "the server exited with status 1" and its stderr, rather than a
// bare "connection closed".
func (s *stdioTransport) lostErr(ctx context.Context) error {
	t := time.NewTimer(exitReasonWait + stderrWait + 50*time.Millisecond)
	defer t.Stop()
	select {
	case <-s.c.done:
	case <-ctx.Done():
	case <-t.C:
	}
	return s.c.closedErr()
}

func (s *stdioTransport) notify(ctx context.Context, method string, params json.RawMessage) error {
	var p any
	if params != nil {
		p = params
	}
	if err := s.conn.Notify(ctx, method, p); err != nil {
		return fmt.Errorf("sending %s: %w", method, err)
	}
	return nil
}

// abandoned feeds jsonrpc2 a made-up error response for the request, so
// it forgets the request now: a server that honours notifications/cancelled
// never answers, and jsonrpc2 would keep the call (and its arguments)
// until the connection ends. A real late answer is then ignored.
func (s *stdioTransport) abandoned(id int64) {
	s.lines.inject([]byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) +
		`,"error":{"code":-32800,"message":"abandoned by the client"}}`))
}

func (s *stdioTransport) ready() {}

func (s *stdioTransport) shutdown(abort bool) {
	s.abort.Store(abort)
	s.closeOnce.Do(func() { close(s.closing) })
	s.wg.Wait()
}

// stdioHandler receives the server's requests and notifications on
// jsonrpc2's read goroutine. It never blocks it: requests are answered in
// the client's goroutines.
type stdioHandler struct{ s *stdioTransport }

func (h stdioHandler) Handle(_ context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	c := h.s.c
	// stdio has no link between a server message and a call: see
	// soleFlight, and askingFlight for questions.
	if req.Notif {
		c.notification(req.Method, params, c.soleFlight())
		return
	}
	f := c.unnamedFlight(req.Method)
	id := req.ID
	raw, _ := json.Marshal(id)
	c.serverRequest(raw, req.Method, params, f, func(ctx context.Context, result json.RawMessage, rpcErr *RPCError) error {
		if rpcErr != nil {
			e := &jsonrpc2.Error{Code: rpcErr.Code, Message: rpcErr.Message}
			if rpcErr.Data != nil {
				d := rpcErr.Data
				e.Data = &d
			}
			return conn.ReplyWithError(ctx, id, e)
		}
		return conn.Reply(ctx, id, result)
	})
}

// jsonrpcLogger sends jsonrpc2's own complaints (late responses and the
// like) to the client's log at debug level, never to stderr.
type jsonrpcLogger struct{ c *Client }

func (l jsonrpcLogger) Printf(format string, v ...any) {
	l.c.log.Debug("upstream: " + strings.TrimSpace(fmt.Sprintf(format, v...)))
}

// lineStream is the jsonrpc2.ObjectStream of a stdio client: framing's
// line-checked messages, read by a pump goroutine, plus messages the client
// injects (see abandoned). jsonrpc2 reads from one goroutine, so both
// sources meet in ReadObject.
type lineStream struct {
	fs       *framing.Stream
	msgs     chan json.RawMessage // from the pump
	pumpDone chan struct{}        // closed when the pump has ended (and msgs is closed)
	stopped  chan struct{}        // closed by Close: ReadObject ends, the pump stops handing on
	stopOnce sync.Once

	mu    sync.Mutex
	queue []json.RawMessage // injected
	wake  chan struct{}     // capacity 1: something was injected
}

func newLineStream(fs *framing.Stream, wg *sync.WaitGroup) *lineStream {
	l := &lineStream{
		fs:       fs,
		msgs:     make(chan json.RawMessage),
		pumpDone: make(chan struct{}),
		stopped:  make(chan struct{}),
		wake:     make(chan struct{}, 1),
	}
	wg.Go(l.pump)
	return l
}

// pump reads lines until the pipe ends or is closed.
func (l *lineStream) pump() {
	defer close(l.pumpDone)
	defer close(l.msgs)
	for {
		var m json.RawMessage
		if err := l.fs.ReadObject(&m); err != nil {
			return
		}
		select {
		case l.msgs <- m:
		case <-l.stopped:
			return
		}
	}
}

func (l *lineStream) inject(m json.RawMessage) {
	l.mu.Lock()
	l.queue = append(l.queue, m)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// ReadObject hands jsonrpc2 the next message; io.EOF once the server's
// stdout has ended or the stream is closed.
func (l *lineStream) ReadObject(v any) error {
	for {
		l.mu.Lock()
		if len(l.queue) > 0 {
			m := l.queue[0]
			l.queue = l.queue[1:]
			l.mu.Unlock()
			return json.Unmarshal(m, v)
		}
		l.mu.Unlock()
		select {
		case m, ok := <-l.msgs:
			if !ok {
				return io.EOF
			}
			return json.Unmarshal(m, v)
		case <-l.wake:
		case <-l.stopped:
			return io.EOF
		}
	}
}

func (l *lineStream) WriteObject(v any) error { return l.fs.WriteObject(v) }

// Close is called by jsonrpc2 when the connection closes.
func (l *lineStream) Close() error {
	l.stopOnce.Do(func() { close(l.stopped) })
	return nil
}
