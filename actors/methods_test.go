package actors

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/tools"
)

// echoMethod is a method tool: it answers its params back as the result,
// fails as asked, and remembers its session to notify and ask it after
// the call has ended.
type echoMethod struct {
	mu       sync.Mutex
	sessions map[string]tools.Session
	ended    chan string
	gated    bool
	runs     *atomic.Int32
}

func (e *echoMethod) Spec() tools.Spec {
	return tools.Spec{Name: "echoBack", Description: "answers its params",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"fail":{"type":"string"},"n":{"type":"integer"}}}`),
		Safety:      tools.Safety{RequiresApproval: e.gated}}
}

func (e *echoMethod) Call(_ context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	if e.runs != nil {
		e.runs.Add(1)
	}
	var a struct {
		Fail string `json:"fail"`
		N    int    `json:"n"`
	}
	_ = json.Unmarshal(req.Arguments, &a)
	if a.Fail != "" {
		return nil, tools.Errorf(tools.Kind(a.Fail), "it failed as asked")
	}
	e.mu.Lock()
	e.sessions[req.Session.ID()] = req.Session
	e.mu.Unlock()
	return &protocol.CallToolResult{StructuredContent: map[string]any{"n": a.N, "requestId": req.RequestID}}, nil
}

func (e *echoMethod) SessionEnded(id string) { e.ended <- id }

func (e *echoMethod) session() tools.Session {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, s := range e.sessions {
		return s
	}
	return nil
}

func methodClient(t *testing.T, m *echoMethod) *client {
	t.Helper()
	reg, err := tools.NewRegistry(m)
	if err != nil {
		t.Fatal(err)
	}
	return newClient(t, Options{Session: SessionOptions{Methods: reg,
		MethodTools: map[string][]string{"echoBack": {"echo"}}}}, echoTool())
}

// TestMethodFollowsItsTools: a method is served only while the session's
// tool set has the tools it stands for (MethodTools). When a new tool set
// (a reload) drops one, the method is "method not found" and its tool
// never runs, not even through the gate; when the tool comes back, so does
// the method. A method MethodTools does not name is never served.
func TestMethodFollowsItsTools(t *testing.T) {
	var runs atomic.Int32
	m := &echoMethod{sessions: map[string]tools.Session{}, ended: make(chan string, 4), gated: true, runs: &runs}
	other := &echoMethod{sessions: map[string]tools.Session{}, ended: make(chan string, 4), runs: &runs}
	methods, err := tools.NewRegistry(m, renamed{other, "unnamed"})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(t, Options{Session: SessionOptions{Methods: methods,
		MethodTools: map[string][]string{"echoBack": {"echo", "panic"}}}}, echoTool(), panicTool())
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "echoBack", map[string]any{"n": 1})
	e, _ := c.expectElicitation()
	c.answer(e, `{"decision":"approved"}`)
	if r := c.recv(); r.Error != nil || runs.Load() != 1 {
		t.Fatalf("with its tools served: %s", r.raw)
	}
	c.request(2, "unnamed", nil)
	if r := c.recv(); r.Error == nil || r.Error.Code != protocol.CodeMethodNotFound {
		t.Fatalf("a method MethodTools does not name: %s", r.raw)
	}

	onlyEcho, err := tools.NewRegistry(echoTool())
	if err != nil {
		t.Fatal(err)
	}
	c.host.SetRegistry(onlyEcho)
	if n := c.recv(); n.Method != protocol.NotificationToolsListChanged {
		t.Fatalf("want the list change, got %s", n.raw)
	}
	c.request(3, "echoBack", map[string]any{"n": 3})
	r := c.recv()
	if r.Error == nil || r.Error.Code != protocol.CodeMethodNotFound || !strings.Contains(r.Error.Message, "panic") {
		t.Fatalf("with one of its tools gone: %s, want -32601 naming the tool", r.raw)
	}
	if runs.Load() != 1 {
		t.Fatalf("the hidden method ran")
	}

	both, err := tools.NewRegistry(echoTool(), panicTool())
	if err != nil {
		t.Fatal(err)
	}
	c.host.SetRegistry(both)
	if n := c.recv(); n.Method != protocol.NotificationToolsListChanged {
		t.Fatalf("want the list change, got %s", n.raw)
	}
	c.request(4, "echoBack", map[string]any{"n": 4})
	e, _ = c.expectElicitation()
	c.answer(e, `{"decision":"approved"}`)
	if r := c.recv(); r.Error != nil || runs.Load() != 2 {
		t.Fatalf("with its tools back: %s", r.raw)
	}
}

// renamed serves a tool under another name.
type renamed struct {
	tools.Tool
	name string
}

func (r renamed) Spec() tools.Spec {
	s := r.Tool.Spec()
	s.Name = r.name
	return s
}

// TestMethodsAreServedBesideMCP: a method of SessionOptions.Methods is
// answered with its tool's structured content, its failures are JSON-RPC
// errors coded by kind, and it is neither listed nor callable as a tool.
func TestMethodsAreServedBesideMCP(t *testing.T) {
	m := &echoMethod{sessions: map[string]tools.Session{}, ended: make(chan string, 4)}
	c := methodClient(t, m)
	c.request(1, "echoBack", nil)
	if r := c.recv(); r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest {
		t.Fatalf("before initialize: %s", r.raw)
	}
	c.initialize("2025-06-18")
	c.request(2, "echoBack", map[string]any{"n": 7})
	if r := c.recv(); r.Error != nil || string(r.Result) != `{"n":7,"requestId":2}` {
		t.Fatalf("echoBack: %s", r.raw)
	}
	c.request("x", "echoBack", nil)
	if r := c.recv(); r.Error != nil || string(r.Result) != `{"n":0,"requestId":"x"}` {
		t.Fatalf("echoBack without params: %s", r.raw)
	}
	for kind, code := range map[string]int64{"invalid_argument": protocol.CodeInvalidParams, "not_found": protocol.CodeInvalidRequest, "internal": protocol.CodeInternalError} {
		c.request(3, "echoBack", map[string]any{"fail": kind})
		r := c.recv()
		if r.Error == nil || r.Error.Code != code || r.Error.Message != "it failed as asked" || !strings.Contains(string(r.Error.Data), `"correlationId":"c-`) {
			t.Fatalf("%s: %s", kind, r.raw)
		}
	}
	c.request(4, "echoBack", map[string]any{"n": "seven"})
	if r := c.recv(); r.Error == nil || r.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("params against the schema: %s", r.raw)
	}
	c.request(5, "echoBack", []int{1})
	if r := c.recv(); r.Error == nil || r.Error.Code != protocol.CodeInvalidParams {
		t.Fatalf("array params: %s", r.raw)
	}
	c.request(6, "tools/list", nil)
	if r := c.recv(); strings.Contains(r.raw, "echoBack") {
		t.Fatalf("a method is listed as a tool: %s", r.raw)
	}
	c.request(7, "tools/call", map[string]any{"name": "echoBack"})
	if r := c.toolResult(c.recv()); !r.IsError {
		t.Fatalf("a method is callable as a tool: %+v", r)
	}
	c.request(8, "noSuchMethod", nil)
	if r := c.recv(); r.Error == nil || r.Error.Code != protocol.CodeMethodNotFound {
		t.Fatalf("unknown method: %s", r.raw)
	}
}

// TestMethodSessionOutlivesItsCall: a method's tool notifies and asks its
// session after the call has answered, and hears when the session ends.
func TestMethodSessionOutlivesItsCall(t *testing.T) {
	m := &echoMethod{sessions: map[string]tools.Session{}, ended: make(chan string, 4)}
	c := methodClient(t, m)
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "echoBack", nil)
	c.recv()
	s := m.session()
	s.Notify("codex/event/task_started", map[string]any{"conversationId": "abc"})
	if n := c.recv(); n.Method != "codex/event/task_started" || string(n.Params) != `{"conversationId":"abc"}` {
		t.Fatalf("notification: %s", n.raw)
	}
	answered := make(chan string, 1)
	go func() {
		res, err := s.Client().Call(context.Background(), "execCommandApproval", map[string]any{"callId": "c1"})
		answered <- string(res) + errString(err)
	}()
	req := c.recv()
	if req.Method != "execCommandApproval" {
		t.Fatalf("want the request, got %s", req.raw)
	}
	c.answer(req, `{"decision":"approved"}`)
	if got := <-answered; got != `{"decision":"approved"}` {
		t.Fatalf("answer: %s", got)
	}
	id := s.ID()
	c.closeInput()
	select {
	case got := <-m.ended:
		if got != id {
			t.Fatalf("ended %q, want %q", got, id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SessionEnded was not called")
	}
}

// TestMethodGoesThroughTheGate: a method that needs approval is asked for
// like a tool, and a decline is a JSON-RPC error that ran nothing.
func TestMethodGoesThroughTheGate(t *testing.T) {
	var runs atomic.Int32
	m := &echoMethod{sessions: map[string]tools.Session{}, ended: make(chan string, 4), gated: true, runs: &runs}
	c := methodClient(t, m)
	c.initializeWith("2025-06-18", elicitCaps)
	c.request(1, "echoBack", map[string]any{"n": 1})
	e, p := c.expectElicitation()
	if !strings.Contains(p.Message, "echoBack") {
		t.Fatalf("prompt: %s", p.Message)
	}
	c.answer(e, `{"decision":"denied"}`)
	if r := c.recv(); r.Error == nil || r.Error.Code != protocol.CodeInvalidRequest || !strings.Contains(r.Error.Message, "declined") || runs.Load() != 0 {
		t.Fatalf("declined method: %s (runs %d)", r.raw, runs.Load())
	}
	c.request(2, "echoBack", map[string]any{"n": 2})
	e, _ = c.expectElicitation()
	c.answer(e, `{"action":"accept","content":{"decision":"once"}}`)
	if r := c.recv(); r.Error != nil || runs.Load() != 1 {
		t.Fatalf("approved method: %s", r.raw)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
