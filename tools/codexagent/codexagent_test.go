package codexagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/tools"
)

// codexBinary returns the pinned Codex CLI that scripts/test installs in
// e2e/codex; without it the tests skip locally and fail in CI.
func codexBinary(t *testing.T) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "e2e", "codex", "node_modules", ".bin", "codex"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: scripts/test should have installed it", bin)
		}
		t.Skip("the Codex CLI is not installed (e2e/codex): run scripts/test")
	}
	return bin
}

// scriptedModel stands in for the OpenAI Responses API (a test-local copy
// of e2e's): Codex POSTs /v1/responses and reads an SSE stream of
// response.created, response.output_item.done and response.completed.
// next decides the one output item from the request; a nil item holds the
// request open until Codex goes away.
type scriptedModel struct {
	srv  *httptest.Server
	next func(req modelRequest) map[string]any

	mu       sync.Mutex
	requests []modelRequest
	got      chan struct{} // one token per request
}

type modelRequest struct {
	Input []map[string]any `json:"input"`
}

func newScriptedModel(t *testing.T, next func(modelRequest) map[string]any) *scriptedModel {
	m := &scriptedModel{next: next, got: make(chan struct{}, 100)}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/responses" {
		http.Error(w, "not a Responses API request", http.StatusNotFound)
		return
	}
	var req modelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.mu.Lock()
	m.requests = append(m.requests, req)
	n := len(m.requests)
	m.mu.Unlock()
	m.got <- struct{}{}

	item := m.next(req)
	if item == nil {
		<-r.Context().Done() // Codex hangs up when it is killed
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	id := fmt.Sprintf("resp_%d", n)
	for _, ev := range []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": id}},
		{"type": "response.output_item.done", "item": item},
		{"type": "response.completed", "response": map[string]any{"id": id,
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}},
	} {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
}

func (m *scriptedModel) last() modelRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests[len(m.requests)-1]
}

func modelMessage(text string) map[string]any {
	return map[string]any{"type": "message", "role": "assistant", "id": "msg_final",
		"content": []any{map[string]any{"type": "output_text", "text": text}}}
}

// texts lists "role: text" for the messages of a request's input.
func (req modelRequest) texts() []string {
	var out []string
	for _, it := range req.Input {
		content, _ := it["content"].([]any)
		for _, c := range content {
			if c, ok := c.(map[string]any); ok {
				if s, ok := c["text"].(string); ok {
					out = append(out, fmt.Sprintf("%v: %s", it["role"], s))
				}
			}
		}
	}
	return out
}

// setup writes a CODEX_HOME naming the scripted model as provider and
// returns the tools and the workspace.
func setup(t *testing.T, model *scriptedModel) (*toolSet, []tools.Tool, string) {
	t.Helper()
	bin := codexBinary(t)
	home, ws := t.TempDir(), t.TempDir()
	cfg := fmt.Sprintf(`model = "scripted"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"
`, model.srv.URL+"/v1")
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: ws, Timeout: 2 * time.Minute,
		// No RUST_BACKTRACE, no API keys: a small, explicit environment.
		Env: map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "CODEX_HOME": home, "LANG": "C.UTF-8"}}))
	if err != nil {
		t.Fatal(err)
	}
	return ts[0].(*codexTool).s, ts, ws
}

// recorder is a tools.Reporter that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	progress []string
	logs     []map[string]any
}

func (r *recorder) Progress(done, total float64, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, msg)
}

func (r *recorder) Log(level protocol.LoggingLevel, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, data.(map[string]any))
}

func (r *recorder) Ready(ctx context.Context) error { return ctx.Err() }

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.logs {
		out = append(out, fmt.Sprint(l["type"]))
	}
	return out
}

func call(ctx context.Context, tool tools.Tool, rep tools.Reporter, client tools.Client, args any) (*protocol.CallToolResult, error) {
	b, _ := json.Marshal(args)
	return tool.Call(ctx, &tools.Request{Arguments: b, Reporter: rep, WantsProgress: rep != nil, Client: client})
}

func structured(t *testing.T, res *protocol.CallToolResult) (id, msg string) {
	t.Helper()
	var out struct{ ThreadID, Content, ConversationID, Message string }
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &out); err != nil {
		t.Fatal(err)
	}
	if res.Meta[MetaConversationID] != out.ConversationID || out.ConversationID == "" {
		t.Fatalf("_meta %v and structuredContent %s disagree on the conversation id", res.Meta, res.StructuredContent)
	}
	// 0.153's names and troupe's carry the same values.
	if out.ThreadID != out.ConversationID || out.Content != out.Message {
		t.Fatalf("structuredContent %s: threadId/content differ from conversationId/message", res.StructuredContent)
	}
	return out.ConversationID, out.Message
}

// TestCodexThenReply starts a conversation, continues it, and checks that
// the model saw the first turn in the second request, and that Codex's
// events reached the reporter.
func TestCodexThenReply(t *testing.T) {
	turn := 0
	model := newScriptedModel(t, func(modelRequest) map[string]any {
		turn++
		return modelMessage(fmt.Sprintf("answer %d", turn))
	})
	_, ts, _ := setup(t, model)
	ctx := context.Background()

	rep := &recorder{}
	res, err := call(ctx, ts[0], rep, nil, map[string]any{"prompt": "first question", "base-instructions": "BASE RULES",
		"developer-instructions": "DEV RULES"})
	if err != nil {
		t.Fatal(err)
	}
	id, msg := structured(t, res)
	if msg != "answer 1" || res.Content[0].Text != "answer 1" {
		t.Fatalf("codex returned %q / %+v, want answer 1", msg, res.Content)
	}
	if first := model.last().texts(); !contains(first, "developer: BASE RULES") {
		t.Errorf("base-instructions did not reach the model: %q", first)
	}
	if first := model.last().texts(); !contains(first, "developer: DEV RULES") {
		t.Errorf("developer-instructions did not reach the model: %q", first)
	}
	if !contains(rep.progress, "message: answer 1") || !contains(rep.progress, "Codex turn started") {
		t.Errorf("progress = %q", rep.progress)
	}
	if types := rep.types(); !contains(types, "turn/started") || !contains(types, "item/completed") || !contains(types, "turn/completed") {
		t.Errorf("logged event types = %q", types)
	}

	res, err = call(ctx, ts[1], nil, nil, map[string]any{"conversationId": id, "prompt": "second question"})
	if err != nil {
		t.Fatal(err)
	}
	id2, msg := structured(t, res)
	if id2 != id || msg != "answer 2" {
		t.Fatalf("codex-reply returned %s %q, want %s \"answer 2\"", id2, msg, id)
	}
	seen := model.last().texts()
	for _, want := range []string{"user: first question", "assistant: answer 1", "user: second question"} {
		if !contains(seen, want) {
			t.Errorf("the second request lacks %q: %q", want, seen)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestReplyUnknownConversation needs no Codex: the table refuses first.
func TestReplyUnknownConversation(t *testing.T) {
	bin, err := os.Executable() // any executable will do
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(context.Background(), ts[1], nil, nil, map[string]any{"conversationId": "nope", "prompt": "hi"})
	te, ok := tools.AsError(err)
	if !ok || te.Kind != tools.KindNotFound || !strings.Contains(te.Message, `"nope"`) {
		t.Fatalf("err = %v, want not_found naming the id", err)
	}
}

func TestToolsRefusesBadBinary(t *testing.T) {
	for _, bin := range []string{"codex", filepath.Join(t.TempDir(), "missing"), t.TempDir()} {
		if _, err := Tools(testOptions(t, Options{Binary: bin, Workspace: t.TempDir()})); err == nil {
			t.Errorf("Tools accepted binary %q", bin)
		}
	}
}

// TestCancelKillsCodex cancels a call while the model holds its answer
// back, and checks that the call returns promptly and Codex's process
// group is gone.
func TestCancelKillsCodex(t *testing.T) {
	model := newScriptedModel(t, func(modelRequest) map[string]any { return nil })
	s, ts, _ := setup(t, model)
	pids := make(chan int, 1)
	s.onStart = func(pid int) { pids <- pid }

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := call(ctx, ts[0], &recorder{}, nil, map[string]any{"prompt": "take your time"})
		errc <- err
	}()
	select {
	case <-model.got:
	case err := <-errc:
		t.Fatalf("the call ended before the model was asked: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Codex never asked the model")
	}
	pid := <-pids
	start := time.Now()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the call did not return after cancellation")
	}
	if d := time.Since(start); d > 3*killGrace+interruptWait {
		t.Errorf("stopping took %s", d)
	}
	// SIGKILLed members vanish once their new parent (init) reaps them.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := syscall.Kill(-pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("ps", "-o", "pid,stat,args", "-g", fmt.Sprint(pid)).CombinedOutput()
			t.Fatalf("Codex's process group %d is still there (kill 0: %v):\n%s", pid, err, out)
		}
	}
	if s.convs.len() != 1 {
		t.Errorf("the cancelled conversation is not kept (%d)", s.convs.len())
	}
}

// approver is a tools.Client that answers every elicitation with decision,
// as a form answer, or, when old is set, in the former top-level form
// clients of Codex's old MCP server send ({"decision": "approved"}).
type approver struct {
	decision string
	old      bool
	mu       sync.Mutex
	asked    []string
}

func (a *approver) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	p := params.(protocol.ElicitRequestParams)
	a.mu.Lock()
	a.asked = append(a.asked, p.Message)
	a.mu.Unlock()
	if a.old {
		return json.Marshal(map[string]any{"decision": a.decision})
	}
	return json.Marshal(map[string]any{"action": "accept", "content": map[string]any{"decision": a.decision}})
}

// TestApprovalIsRelayed lets the model ask for a command under the
// untrusted policy: Codex asks, the question reaches the client as an
// elicitation, and the answer decides whether the command runs.
func TestApprovalIsRelayed(t *testing.T) {
	for _, tc := range []struct {
		name, decision string
		old, made      bool
	}{
		{"accept", "accept", false, true},
		{"decline", "decline", false, false},
		// Clients of the old codex mcp-server answer {"decision": ...}.
		{"old approved", protocol.CodexApproved, true, true},
		{"old approved for session", protocol.CodexApprovedForSession, true, true},
		{"old denied", protocol.CodexDenied, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := newScriptedModel(t, func(req modelRequest) map[string]any {
				for _, it := range req.Input {
					if it["type"] == "function_call_output" {
						return modelMessage("done")
					}
				}
				args, _ := json.Marshal(map[string]any{"cmd": "touch made-by-codex"})
				return map[string]any{"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": string(args)}
			})
			_, ts, ws := setup(t, model)
			client := &approver{decision: tc.decision, old: tc.old}
			sess := &fakeSession{}
			b, _ := json.Marshal(map[string]any{
				// Codex's own sandbox is not what is tested here (and its
				// helper depends on the machine): only the relayed approval.
				"prompt": "make a file", "approval-policy": "untrusted", "sandbox": "danger-full-access"})
			res, err := ts[0].Call(context.Background(), &tools.Request{Arguments: b, Reporter: &recorder{}, Client: client,
				Session: sess, RequestID: json.RawMessage(`"r1"`)})
			if err != nil {
				t.Fatal(err)
			}
			if _, msg := structured(t, res); msg != "done" {
				t.Fatalf("message %q", msg)
			}
			if len(client.asked) != 1 || !strings.Contains(client.asked[0], "touch made-by-codex") {
				t.Fatalf("elicitations: %q", client.asked)
			}
			_, err = os.Stat(filepath.Join(ws, "made-by-codex"))
			if made := err == nil; made != tc.made {
				t.Fatalf("decision %s: file made = %v", tc.decision, made)
			}
			// The old servers announced the question and the command's
			// outcome as events.
			types := sess.types()
			if !contains(types, "exec_approval_request") || !contains(types, "exec_command_end") {
				t.Errorf("codex/event types = %q", types)
			}
		})
	}
}

func TestConversationTableIsBounded(t *testing.T) {
	cs := newConversations(2)
	for _, id := range []string{"a", "b", "c"} {
		cs.add(id, "", "")
		cs.release(id)
	}
	if _, err := cs.acquire("a"); err == nil {
		t.Fatal("the least recently used conversation was kept")
	}
	if _, err := cs.acquire("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.acquire("b"); err == nil {
		t.Fatal("a busy conversation was acquired twice")
	}
	cs.add("d", "", "") // b is busy, c is the idle one to go
	if _, err := cs.acquire("c"); err == nil {
		t.Fatal("c should have been forgotten")
	}
}

func TestCwdMustBeInWorkspace(t *testing.T) {
	bin, _ := os.Executable()
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ts[0].(tools.Previewer).Preview(&tools.Request{Arguments: json.RawMessage(`{"prompt":"x","cwd":"/"}`)})
	if te, ok := tools.AsError(err); !ok || te.Kind != tools.KindPermissionDenied {
		t.Fatalf("err = %v, want permission_denied", err)
	}
}

// fakeSession is a tools.Session that keeps the notifications sent to it.
type fakeSession struct {
	mu     sync.Mutex
	events []map[string]any // codex/event params, as the client reads them
}

func (s *fakeSession) ID() string { return "s1" }

func (s *fakeSession) Notify(method string, params any) {
	if method != MethodEvent {
		return
	}
	b, err := json.Marshal(params)
	if err != nil {
		panic(err)
	}
	var p map[string]any
	if err := json.Unmarshal(b, &p); err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, p)
}

func (s *fakeSession) Client() tools.Client { return nil }

func (s *fakeSession) types() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		msg, _ := e["msg"].(map[string]any)
		out = append(out, fmt.Sprint(msg["type"]))
	}
	return out
}

func (s *fakeSession) take() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.events
	s.events = nil
	return out
}

// notifyingRecorder is a recorder that is also a tools.Notifier, as the
// session's reporter is.
type notifyingRecorder struct {
	recorder
	fakeSession
}

func (r *notifyingRecorder) Notify(method string, params map[string]any) {
	r.fakeSession.Notify(method, params)
}

// TestCodexEvents checks the codex/event notifications of a codex call
// and a codex-reply call against what Codex 0.153.4's codex mcp-server
// sent for the same turns: the envelope {_meta: {requestId, threadId},
// id: the turn id ("" for session_configured), msg}, the event order, and
// the final message in task_complete.
func TestCodexEvents(t *testing.T) {
	turn := 0
	model := newScriptedModel(t, func(modelRequest) map[string]any {
		turn++
		return modelMessage(fmt.Sprintf("answer %d", turn))
	})
	_, ts, _ := setup(t, model)
	ctx := context.Background()
	sess := &fakeSession{}
	b, _ := json.Marshal(map[string]any{"prompt": "hello"})
	res, err := ts[0].Call(ctx, &tools.Request{Arguments: b, Session: sess, RequestID: json.RawMessage(`7`)})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := structured(t, res)
	evs := sess.take()
	types := sess.typesOf(evs)
	want := []string{"session_configured", "task_started", "user_message", "agent_message", "token_count", "task_complete"}
	if !subsequence(types, want) {
		t.Fatalf("codex/event types = %q, want %q in this order", types, want)
	}
	if types[0] != "session_configured" || types[len(types)-1] != "task_complete" {
		t.Errorf("codex/event types = %q: session_configured first and task_complete last", types)
	}
	var turnID string
	for _, e := range evs {
		meta, _ := e["_meta"].(map[string]any)
		if meta["requestId"] != float64(7) || meta["threadId"] != id {
			t.Errorf("_meta = %v, want requestId 7 and threadId %s", meta, id)
		}
		msg := e["msg"].(map[string]any)
		switch msg["type"] {
		case "session_configured":
			if e["id"] != "" || msg["session_id"] != id || msg["thread_id"] != id || msg["model"] != "scripted" {
				t.Errorf("session_configured = %v", e)
			}
			if _, has := msg["rollout_path"]; has {
				t.Error("session_configured names the rollout file")
			}
		case "task_started":
			turnID, _ = msg["turn_id"].(string)
		case "agent_message":
			if msg["message"] != "answer 1" {
				t.Errorf("agent_message = %v", msg)
			}
		case "task_complete":
			if msg["last_agent_message"] != "answer 1" {
				t.Errorf("task_complete = %v", msg)
			}
		}
	}
	if turnID == "" {
		t.Fatal("task_started named no turn")
	}
	for _, e := range evs[1:] {
		// A warning can come before the turn exists (0.153 gave it the
		// turn's id; troupe cannot know it yet).
		if msg := e["msg"].(map[string]any); msg["type"] == "warning" {
			continue
		}
		if e["id"] != turnID {
			t.Errorf("event id %v, want the turn id %s: %v", e["id"], turnID, e)
		}
	}

	// codex-reply, through a Reporter that is a Notifier (no Session):
	// the same events but no session_configured, as 0.153's codex-reply.
	rep := &notifyingRecorder{}
	b, _ = json.Marshal(map[string]any{"threadId": id, "prompt": "again"})
	res, err = ts[1].Call(ctx, &tools.Request{Arguments: b, Reporter: rep})
	if err != nil {
		t.Fatal(err)
	}
	if _, msg := structured(t, res); msg != "answer 2" {
		t.Fatalf("codex-reply answered %q", msg)
	}
	types = rep.fakeSession.types()
	if contains(types, "session_configured") || !subsequence(types, []string{"task_started", "agent_message", "task_complete"}) {
		t.Errorf("codex-reply's codex/event types = %q", types)
	}
	if len(rep.logs) == 0 {
		t.Error("the log messages stopped")
	}
}

func (s *fakeSession) typesOf(evs []map[string]any) []string {
	var out []string
	for _, e := range evs {
		msg, _ := e["msg"].(map[string]any)
		out = append(out, fmt.Sprint(msg["type"]))
	}
	return out
}

// subsequence reports whether want appears in list in order.
func subsequence(list, want []string) bool {
	i := 0
	for _, x := range list {
		if i < len(want) && x == want[i] {
			i++
		}
	}
	return i == len(want)
}

// TestReplyConversationID checks codex-reply's two names for the
// conversation: threadId (0.153) and conversationId (0.42, troupe).
func TestReplyConversationID(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args map[string]any
		kind tools.Kind
		text string
	}{
		{map[string]any{"prompt": "hi"}, tools.KindInvalidArgument, "threadId"},
		{map[string]any{"threadId": "a", "conversationId": "b", "prompt": "hi"}, tools.KindInvalidArgument, "differ"},
		// One of them, or both equal: looked up (and not found here).
		{map[string]any{"threadId": "t1", "prompt": "hi"}, tools.KindNotFound, `"t1"`},
		{map[string]any{"conversationId": "c1", "prompt": "hi"}, tools.KindNotFound, `"c1"`},
		{map[string]any{"threadId": "x1", "conversationId": "x1", "prompt": "hi"}, tools.KindNotFound, `"x1"`},
	} {
		_, err := call(context.Background(), ts[1], nil, nil, tc.args)
		te, ok := tools.AsError(err)
		if !ok || te.Kind != tc.kind || !strings.Contains(te.Message, tc.text) {
			t.Errorf("%v: err = %v, want %s mentioning %s", tc.args, err, tc.kind, tc.text)
		}
		b, _ := json.Marshal(tc.args)
		_, err = ts[1].(tools.Previewer).Preview(&tools.Request{Arguments: b})
		if te, ok := tools.AsError(err); !ok || te.Kind != tc.kind {
			t.Errorf("%v: preview err = %v, want %s", tc.args, err, tc.kind)
		}
	}
}

// TestOlderCodexArguments checks the arguments older Codex releases' codex
// tool took reach thread/start: developer-instructions and compact-prompt
// (0.153), approval-policy on-failure and include-plan-tool (0.42).
func TestOlderCodexArguments(t *testing.T) {
	bin, _ := os.Executable()
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: t.TempDir()}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"prompt": "x", "developer-instructions": "DEV", "compact-prompt": "SHORTEN",
		"approval-policy": "on-failure", "include-plan-tool": true, "config": map[string]any{"model_verbosity": "low"}})
	_, _, start, err := ts[0].(*codexTool).resolve(&tools.Request{Arguments: b})
	if err != nil {
		t.Fatal(err)
	}
	config, _ := start["config"].(map[string]any)
	if start["developerInstructions"] != "DEV" || start["approvalPolicy"] != "on-request" ||
		config["compact_prompt"] != "SHORTEN" || config["model_verbosity"] != "low" {
		t.Fatalf("thread/start params = %v", start)
	}
}
