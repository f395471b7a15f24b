package actors

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/protocol"
	"troupe/tools"
)

// client drives a Host over in-memory pipes, as a stdio client would.
type client struct {
	t      *testing.T
	in     *io.PipeWriter // what the client writes (the server's stdin)
	lines  chan string
	done   <-chan struct{}
	conn   *actor.PID
	host   *Host
	closed sync.Once
}

// testLogger logs to the test's output only when -v is given, and always
// through t.Log so output is attributed to the test.
func testLogger(t *testing.T) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newClient(t *testing.T, o Options, ts ...tools.Tool) *client {
	t.Helper()
	reg, err := tools.NewRegistry(ts...)
	if err != nil {
		t.Fatal(err)
	}
	o.Session.Registry = reg
	if o.Logger == nil {
		o.Logger = testLogger(t)
	}
	host := NewHost(o)
	c := attachClient(t, host)
	t.Cleanup(func() {
		c.closeInput()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("connection did not end after its input closed")
		}
		if !host.Close(5 * time.Second) {
			t.Error("tool goroutines still running after Close")
		}
	})
	return c
}

// newClientOnHost serves another stdio-like client on an existing host.
func newClientOnHost(t *testing.T, host *Host) *client {
	t.Helper()
	c := attachClient(t, host)
	t.Cleanup(func() {
		c.closeInput()
		<-c.done
	})
	return c
}

func attachClient(t *testing.T, host *Host) *client {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &client{t: t, in: inW, lines: make(chan string, 1024), host: host}
	conn, err := host.ServeStream(inR, outW)
	if err != nil {
		t.Fatal(err)
	}
	c.done, c.conn = conn.Done(), conn.pid
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	return c
}

func (c *client) closeInput() { c.closed.Do(func() { c.in.Close() }) }

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *client) request(id any, method string, params any) {
	c.t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	c.send(string(b))
}

func (c *client) notify(method string, params any) {
	c.t.Helper()
	m := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		m["params"] = params
	}
	b, _ := json.Marshal(m)
	c.send(string(b))
}

// msg is one decoded line from the server.
type msg struct {
	raw    string
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	} `json:"error"`
}

func (c *client) recv() msg {
	c.t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			c.t.Fatal("output closed while waiting for a message")
		}
		var m msg
		if strings.HasPrefix(l, "[") {
			return msg{raw: l} // a batch response; callers read raw
		}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			c.t.Fatalf("server wrote invalid JSON %q: %v", l, err)
		}
		m.raw = l
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatal("timed out waiting for a message")
	}
	return msg{}
}

// expectNothing checks that no message arrives within d.
func (c *client) expectNothing(d time.Duration) {
	c.t.Helper()
	select {
	case l := <-c.lines:
		c.t.Fatalf("unexpected message %s", l)
	case <-time.After(d):
	}
}

func (c *client) initialize(version string) msg {
	c.t.Helper()
	c.request(0, "initialize", map[string]any{
		"protocolVersion": version, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test", "version": "1"},
	})
	m := c.recv()
	if m.Error != nil {
		c.t.Fatalf("initialize failed: %s", m.raw)
	}
	c.notify("notifications/initialized", nil)
	return m
}

// toolResult decodes m as a CallToolResult.
func (c *client) toolResult(m msg) protocol.CallToolResult {
	c.t.Helper()
	if m.Error != nil {
		c.t.Fatalf("want a tool result, got error %s", m.raw)
	}
	var r protocol.CallToolResult
	if err := json.Unmarshal(m.Result, &r); err != nil {
		c.t.Fatalf("result %s: %v", m.raw, err)
	}
	return r
}

// funcTool is a test tool made of a function.
type funcTool struct {
	name string
	call func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error)
}

func (f funcTool) Spec() tools.Spec {
	return tools.Spec{Name: f.name, Description: "test tool",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":0}},"additionalProperties":false}`)}
}

func (f funcTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	return f.call(ctx, req)
}

func textResult(s string) *protocol.CallToolResult {
	return &protocol.CallToolResult{Content: []protocol.Content{protocol.TextContent(s)}}
}

// echoTool answers at once.
func echoTool() tools.Tool {
	return funcTool{name: "echo", call: func(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		return textResult("echo " + string(req.Arguments)), nil
	}}
}

// panicTool panics; it exists only in tests.
func panicTool() tools.Tool {
	return funcTool{name: "panic", call: func(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
		panic("boom from a test tool")
	}}
}

// blockTool blocks until its context ends, reporting that on cancelled, or
// until release is closed.
func blockTool(cancelled chan<- struct{}, release <-chan struct{}) tools.Tool {
	return funcTool{name: "block", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		req.Progress(1, 2, "started")
		select {
		case <-ctx.Done():
			if cancelled != nil {
				cancelled <- struct{}{}
			}
			return nil, ctx.Err()
		case <-release:
			return textResult("released"), nil
		}
	}}
}

// stubbornTool ignores cancellation for d: a badly behaved tool.
func sleepTool(d time.Duration) tools.Tool {
	return funcTool{name: "sleep", call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		select {
		case <-time.After(d):
			return textResult(fmt.Sprint("slept ", d)), nil
		case <-ctx.Done():
			return nil, errors.New("interrupted")
		}
	}}
}

func errorText(r protocol.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

type (
	ctxT     = context.Context
	toolsReq = tools.Request
)

// structuredTool has an output schema and answers with structured content.
type structuredT struct{}

func structuredTool() tools.Tool { return structuredT{} }

func (structuredT) Spec() tools.Spec {
	return tools.Spec{Name: "structured", Title: "Structured",
		InputSchema:  json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}}}`)}
}

func (structuredT) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	return tools.StructuredResult(map[string]int{"answer": 42})
}
