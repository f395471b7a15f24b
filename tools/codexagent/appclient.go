package codexagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// subQueue bounds the notifications a subscriber has not taken yet. A
// subscriber that falls further behind loses the oldest ones (drop-oldest,
// counted in subscription.Dropped): the reader never waits for a
// subscriber, so one slow listener cannot stall Codex's answers to
// everybody else, and the newest events (a turn's end) are the ones kept.
const subQueue = 256

// maxServerRequests bounds the requests from Codex being handled at once
// (approvals waiting for a person); beyond it Codex is refused at once.
const maxServerRequests = 16

// requestHandler answers one request Codex sends the client (an approval).
// It runs on its own goroutine, owned by the appClient, and must return
// once ctx is done (the client closing). A nil error answers with result;
// an *rpcError is sent as it is, any other error as -32603.
type requestHandler func(ctx context.Context, method string, params json.RawMessage) (any, error)

// appClient is a long-lived JSON-RPC connection to one `codex app-server`
// process, shared by every caller of a session: requests from many
// goroutines are matched to their answers by id, notifications are fanned
// out to subscribers (by thread id), and requests from Codex go to a
// handler. Unlike conn (one consumer, one call) it lives until close, or
// until Codex exits, after which every pending and later call fails with
// errExited.
type appClient struct {
	proc      *process
	info      initializeResult
	onRequest requestHandler
	// observe, when set, sees every notification on the reader goroutine
	// before subscribers do, for bookkeeping that must not miss any (turn
	// state). It must not block.
	observe func(method string, params json.RawMessage)

	writeMu sync.Mutex

	mu       sync.Mutex
	nextID   int64
	pending  map[string]chan message
	subs     map[*subscription]struct{}
	closed   bool  // close was called or the reader ended
	exitErr  error // why the reader ended
	handlers int   // server requests being handled

	ctx    context.Context // cancelled by close: ends the handlers
	cancel context.CancelFunc
	wg     sync.WaitGroup // the reader and the handlers
	done   chan struct{}  // closed when the reader has ended
}

// initializeResult is what app-server answers initialize with.
type initializeResult struct {
	UserAgent string `json:"userAgent"`
	CodexHome string `json:"codexHome"`
}

// startAppClient starts `codex app-server` with start and initializes
// it as turn.go does. onRequest answers Codex's requests (nil refuses
// them all); observe, when set, sees every notification first.
func startAppClient(ctx context.Context, start func() (*process, error),
	onRequest requestHandler, observe func(string, json.RawMessage)) (*appClient, error) {
	proc, err := start()
	if err != nil {
		return nil, fmt.Errorf("could not start Codex: %w", err)
	}
	c := newAppClient(proc, onRequest, observe)
	raw, err := c.call(ctx, "initialize", map[string]any{
		"clientInfo": map[string]any{"name": "troupe", "title": "troupe", "version": "0"},
	})
	if err == nil {
		err = json.Unmarshal(raw, &c.info)
	}
	if err == nil {
		err = c.notify("initialized", nil)
	}
	if err != nil {
		c.close(false)
		if tail := proc.stderr.String(); tail != "" && errors.Is(err, errExited) {
			err = fmt.Errorf("%w: %s", err, lastLines(tail, 5))
		}
		return nil, fmt.Errorf("Codex app-server did not initialize: %w", err)
	}
	return c, nil
}

func newAppClient(p *process, onRequest requestHandler, observe func(string, json.RawMessage)) *appClient {
	c := &appClient{proc: p, onRequest: onRequest, observe: observe,
		pending: map[string]chan message{}, subs: map[*subscription]struct{}{}, done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.read()
	return c
}

// read dispatches Codex's messages until its stdout ends.
func (c *appClient) read() {
	defer c.wg.Done()
	defer close(c.done)
	r := bufio.NewReaderSize(c.proc.stdout, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readLine(r)
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(line, &m) != nil {
			continue // not JSON-RPC: Codex printed something else
		}
		switch {
		case m.isResponse():
			c.mu.Lock()
			ch := c.pending[string(m.ID)]
			delete(c.pending, string(m.ID))
			c.mu.Unlock()
			if ch != nil {
				ch <- m // buffered: never blocks
			}
		case m.isRequest():
			c.serve(m)
		case m.Method != "":
			if c.observe != nil {
				c.observe(m.Method, m.Params)
			}
			c.fanOut(m)
		}
	}
	c.mu.Lock()
	c.closed = true
	if err != nil && err.Error() != "EOF" {
		c.exitErr = fmt.Errorf("%w: %v", errExited, err)
	} else {
		c.exitErr = errExited
	}
	for id, ch := range c.pending {
		close(ch) // the caller sees exitErr
		delete(c.pending, id)
	}
	for s := range c.subs {
		s.end()
		delete(c.subs, s)
	}
	c.mu.Unlock()
}

// serve hands a request from Codex to the handler on its own goroutine.
func (c *appClient) serve(m message) {
	c.mu.Lock()
	busy := c.onRequest == nil || c.handlers >= maxServerRequests || c.closed
	if !busy {
		c.handlers++
		c.wg.Add(1)
	}
	c.mu.Unlock()
	if busy {
		_ = c.write(map[string]any{"id": m.ID, "error": rpcError{Code: -32000, Message: "troupe cannot answer " + m.Method + " now"}})
		return
	}
	go func() {
		defer c.wg.Done()
		defer func() {
			c.mu.Lock()
			c.handlers--
			c.mu.Unlock()
		}()
		res, err := c.onRequest(c.ctx, m.Method, m.Params)
		if err != nil {
			var re *rpcError
			if !errors.As(err, &re) {
				re = &rpcError{Code: -32603, Message: err.Error()}
			}
			_ = c.write(map[string]any{"id": m.ID, "error": re})
			return
		}
		_ = c.write(map[string]any{"id": m.ID, "result": res})
	}()
}

// fanOut gives a notification to every subscriber it concerns.
func (c *appClient) fanOut(m message) {
	thread := threadOf(m.Params)
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.subs {
		if s.thread == "" || s.thread == thread {
			s.put(m)
		}
	}
}

// threadOf is the thread a notification belongs to: params.threadId, or
// params.thread.id (thread/started); "" for global ones (account).
func threadOf(params json.RawMessage) string {
	var p struct {
		ThreadID string `json:"threadId"`
		Thread   struct {
			ID string `json:"id"`
		} `json:"thread"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	if p.ThreadID != "" {
		return p.ThreadID
	}
	return p.Thread.ID
}

// subscription receives the notifications of one thread ("" for all) in
// order, through a bounded queue (see subQueue).
type subscription struct {
	thread string
	mu     sync.Mutex
	queue  []message
	ready  chan struct{} // a token when queue became non-empty
	ended  bool
	drops  int
}

// subscribe starts receiving thread's notifications ("" for every one).
// The caller must call unsubscribe when done.
func (c *appClient) subscribe(thread string) *subscription {
	s := &subscription{thread: thread, ready: make(chan struct{}, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		s.ended = true
		close(s.ready)
		return s
	}
	c.subs[s] = struct{}{}
	return s
}

// unsubscribe stops s; its next returns false once the queue is empty.
func (c *appClient) unsubscribe(s *subscription) {
	c.mu.Lock()
	if _, ok := c.subs[s]; ok {
		delete(c.subs, s)
		s.end()
	}
	c.mu.Unlock()
}

// put queues m, dropping the oldest queued notification when full.
func (s *subscription) put(m message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	if len(s.queue) >= subQueue {
		s.queue = s.queue[1:]
		s.drops++
	}
	s.queue = append(s.queue, m)
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *subscription) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		s.ended = true
		close(s.ready)
	}
}

// next returns the next notification; false when the subscription ended
// (unsubscribed, or Codex exited) and nothing is left, or ctx is done.
func (s *subscription) next(ctx context.Context) (message, bool) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			m := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return m, true
		}
		ended := s.ended
		s.mu.Unlock()
		if ended {
			return message{}, false
		}
		select {
		case <-ctx.Done():
			return message{}, false
		case <-s.ready:
		}
	}
}

// dropped is how many notifications s lost to a full queue.
func (s *subscription) dropped() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.drops
}

func (c *appClient) write(m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.proc.stdin.Write(append(b, '\n')); err != nil {
		return c.exitError()
	}
	return nil
}

func (c *appClient) notify(method string, params any) error {
	m := map[string]any{"method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(m)
}

// exitError is why the connection ended (errExited, wrapped).
func (c *appClient) exitError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitErr != nil {
		return c.exitErr
	}
	return errExited
}

// call sends a request and waits for its answer, a JSON-RPC error
// (*rpcError), the end of ctx or Codex's exit (errExited).
func (c *appClient) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan message, 1)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, c.exitError()
	}
	c.nextID++
	id := strconv.FormatInt(c.nextID, 10)
	c.pending[id] = ch
	c.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	if err := c.write(map[string]any{"id": json.RawMessage(id), "method": method, "params": params}); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, c.exitError()
		}
		if m.Error != nil {
			return nil, m.Error
		}
		return m.Result, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

func (c *appClient) forget(id string) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// alive reports whether Codex still runs and close was not called.
func (c *appClient) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed
}

// pid is the process (group) id of Codex.
func (c *appClient) pid() int { return c.proc.cmd.Process.Pid }

// close stops Codex and its process group (see process.stop; graceful
// lets it exit by itself first), ends the reader, cancels the request
// handlers and waits for all of them. Safe to call more than once.
func (c *appClient) close(graceful bool) {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.proc.stop(graceful) // closes stdout, which ends the reader
	c.wg.Wait()
}
