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

// maxLine bounds one JSON-RPC line from Codex. Command output travels in
// item notifications, so lines can be long; a longer one ends the call
// instead of growing memory without limit.
const maxLine = 16 << 20

// message is one JSON-RPC message in either direction: a request (ID and
// Method), a notification (Method only) or a response (ID and Result or
// Error). app-server omits the "jsonrpc" member and accepts it missing.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

func (m *message) isRequest() bool  { return m.Method != "" && len(m.ID) > 0 }
func (m *message) isResponse() bool { return m.Method == "" && len(m.ID) > 0 }

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%s (code %d)", e.Message, e.Code) }

// errExited means Codex closed its stdout: it exited or crashed.
var errExited = errors.New("codex app-server exited")

// conn is the JSON-RPC connection to one app-server process. One goroutine
// (the caller's) drives it: call and next hand it every message that is
// not the awaited response, so there is never a second consumer.
type conn struct {
	proc    *process
	in      chan message  // from the reader goroutine; closed when it ends
	quit    chan struct{} // closed by close: the reader stops sending
	readMu  sync.Mutex    // guards readErr
	readErr error

	writeMu sync.Mutex
	nextID  int64
}

func newConn(p *process) *conn {
	c := &conn{proc: p, in: make(chan message, 16), quit: make(chan struct{})}
	go c.read()
	return c
}

// read decodes lines from Codex's stdout until it ends or close is called.
func (c *conn) read() {
	defer close(c.in)
	r := bufio.NewReaderSize(c.proc.stdout, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			c.readMu.Lock()
			c.readErr = err
			c.readMu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(line, &m) != nil {
			continue // not ours to judge: Codex printed something else
		}
		select {
		case c.in <- m:
		case <-c.quit:
			return
		}
	}
}

func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return nil, err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("codex sent a line longer than %d bytes", maxLine)
		}
		if !isPrefix {
			return line, nil
		}
	}
}

// close stops the reader and the process (see process.stop); graceful
// lets Codex exit on its own first.
func (c *conn) close(graceful bool) {
	close(c.quit)
	c.proc.stop(graceful) // closes stdout, which ends the reader
	for range c.in {      // wait for the reader
	}
}

// exitError explains why the connection ended.
func (c *conn) exitError() error {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.readErr != nil && c.readErr.Error() != "EOF" {
		return fmt.Errorf("%w: %v", errExited, c.readErr)
	}
	return errExited
}

func (c *conn) write(m any) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_, err = c.proc.stdin.Write(append(b, '\n'))
	return err
}

// send sends a request and returns its id.
func (c *conn) send(method string, params any) (json.RawMessage, error) {
	c.writeMu.Lock()
	c.nextID++
	id := json.RawMessage(strconv.FormatInt(c.nextID, 10))
	c.writeMu.Unlock()
	return id, c.write(map[string]any{"id": id, "method": method, "params": params})
}

func (c *conn) notify(method string, params any) error {
	m := map[string]any{"method": method}
	if params != nil {
		m["params"] = params
	}
	return c.write(m)
}

// respond answers a request from Codex.
func (c *conn) respond(id json.RawMessage, result any) error {
	return c.write(map[string]any{"id": id, "result": result})
}

// refuse answers a request from Codex with an error.
func (c *conn) refuse(id json.RawMessage, code int64, msg string) error {
	return c.write(map[string]any{"id": id, "error": rpcError{Code: code, Message: msg}})
}

// call sends a request and waits for its response; every other message
// that arrives meanwhile goes to handle. A JSON-RPC error comes back as
// *rpcError.
func (c *conn) call(ctx context.Context, method string, params any, handle func(message) error) (json.RawMessage, error) {
	id, err := c.send(method, params)
	if err != nil {
		return nil, c.exitError()
	}
	for {
		m, err := c.next(ctx)
		if err != nil {
			return nil, err
		}
		if m.isResponse() && string(m.ID) == string(id) {
			if m.Error != nil {
				return nil, m.Error
			}
			return m.Result, nil
		}
		if err := handle(m); err != nil {
			return nil, err
		}
	}
}

// next returns the next message from Codex.
func (c *conn) next(ctx context.Context) (message, error) {
	select {
	case <-ctx.Done():
		return message{}, ctx.Err()
	case m, ok := <-c.in:
		if !ok {
			return message{}, c.exitError()
		}
		return m, nil
	}
}
