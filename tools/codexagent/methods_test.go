package codexagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"troupe/tools"
)

// methSession is a tools.Session that records the notifications it is
// given and answers the client requests with answer.
type methSession struct {
	id     string
	answer func(method string, params any) (json.RawMessage, error)

	mu       sync.Mutex
	notes    []methNote
	requests []methNote
}

type methNote struct {
	method string
	params map[string]any
}

func (s *methSession) ID() string { return s.id }

func (s *methSession) Notify(method string, params any) {
	b, _ := json.Marshal(params)
	var p map[string]any
	_ = json.Unmarshal(b, &p)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notes = append(s.notes, methNote{method, p})
}

func (s *methSession) Client() tools.Client { return methClient{s} }

type methClient struct{ s *methSession }

func (c methClient) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	b, _ := json.Marshal(params)
	var p map[string]any
	_ = json.Unmarshal(b, &p)
	c.s.mu.Lock()
	c.s.requests = append(c.s.requests, methNote{method, p})
	c.s.mu.Unlock()
	if c.s.answer == nil {
		return nil, &tools.ClientError{Code: -32601, Message: "no"}
	}
	return c.s.answer(method, params)
}

// waitFor waits for a notification named method and returns its params.
func (s *methSession) waitFor(t *testing.T, method string, d time.Duration) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		for _, n := range s.notes {
			if n.method == method {
				s.mu.Unlock()
				return n.params
			}
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var got []string
	for _, n := range s.notes {
		got = append(got, n.method)
	}
	t.Fatalf("no %s notification within %s; got %q", method, d, got)
	return nil
}

func (s *methSession) methods() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.notes {
		out = append(out, n.method)
	}
	return out
}

// methodsEnv is a Methods value over a scripted model.
type methodsEnv struct {
	ms    *methodSet
	tools map[string]tools.Tool
	ws    string
	home  string
	pids  chan int
}

func methSetup(t *testing.T, model *scriptedModel, mo MethodOptions) *methodsEnv {
	t.Helper()
	return methSetupWith(t, model, mo, "", nil)
}

// methSetupWith is methSetup with extra config.toml lines (top-level
// keys) and a last word on the options.
func methSetupWith(t *testing.T, model *scriptedModel, mo MethodOptions, extra string, adjust func(*Options)) *methodsEnv {
	t.Helper()
	bin := codexBinary(t)
	home, ws := writeCodexHome(t, model, extra), t.TempDir()
	opts := testOptions(t, Options{Binary: bin, Workspace: ws, Timeout: 2 * time.Minute,
		Env: map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "CODEX_HOME": home, "LANG": "C.UTF-8"}})
	if adjust != nil {
		adjust(&opts)
	}
	list, err := Methods(opts, mo)
	if err != nil {
		t.Fatal(err)
	}
	e := &methodsEnv{tools: map[string]tools.Tool{}, ws: ws, home: home, pids: make(chan int, 16)}
	for _, tl := range list {
		e.tools[tl.Spec().Name] = tl
		e.ms = tl.(*methodTool).ms
		if tl.Spec().Safety.RequiresApproval {
			t.Errorf("%s requires approval", tl.Spec().Name)
		}
	}
	e.ms.onStart = func(pid int) { e.pids <- pid }
	t.Cleanup(func() {
		e.ms.mu.Lock()
		var ids []string
		for id := range e.ms.sessions {
			ids = append(ids, id)
		}
		e.ms.mu.Unlock()
		for _, id := range ids {
			e.ms.sessionEnded(id)
		}
		e.ms.wait()
	})
	return e
}

// call calls a method as a session and returns its result.
func (e *methodsEnv) call(t *testing.T, s *methSession, name string, args any) (map[string]any, error) {
	t.Helper()
	tl := e.tools[name]
	if tl == nil {
		t.Fatalf("no method %s", name)
	}
	b, _ := json.Marshal(args)
	if args == nil {
		b = []byte("{}")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := tl.Call(ctx, &tools.Request{Arguments: b, Session: s})
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(res.StructuredContent.(json.RawMessage), &out); err != nil {
		t.Fatalf("%s: structuredContent %s: %v", name, res.StructuredContent, err)
	}
	return out, nil
}

func (e *methodsEnv) must(t *testing.T, s *methSession, name string, args any) map[string]any {
	t.Helper()
	out, err := e.call(t, s, name, args)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

func methKeys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	methSort(ks)
	return strings.Join(ks, ",")
}

func methSort(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func methWantKind(t *testing.T, err error, kind tools.Kind, text string) {
	t.Helper()
	te, ok := tools.AsError(err)
	if !ok || te.Kind != kind || !strings.Contains(te.Message, text) {
		t.Fatalf("err = %v, want %s containing %q", err, kind, text)
	}
}

func methAnswering(text string) func(modelRequest) map[string]any {
	n := 0
	var mu sync.Mutex
	return func(modelRequest) map[string]any {
		mu.Lock()
		defer mu.Unlock()
		n++
		return modelMessage(fmt.Sprintf("%s %d", text, n))
	}
}

// TestMethodsWithoutModel checks the shapes of the methods that need
// Codex but not the model.
func TestMethodsWithoutModel(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{})
	s := &methSession{id: "s1"}

	// No conversation yet: nothing to list, and no Codex started for it.
	if out := e.must(t, s, "listConversations", nil); methKeys(out) != "items" || len(out["items"].([]any)) != 0 {
		t.Fatalf("listConversations = %v", out)
	}
	select {
	case <-e.pids:
		t.Fatal("listConversations started Codex for a session with no conversations")
	default:
	}

	ua := e.must(t, s, "getUserAgent", nil)
	if u, _ := ua["userAgent"].(string); methKeys(ua) != "userAgent" || !strings.Contains(u, "/0.") {
		t.Errorf("getUserAgent = %v", ua)
	}
	if out := e.must(t, s, "getAuthStatus", map[string]any{}); methKeys(out) != "requiresOpenaiAuth" {
		t.Errorf("getAuthStatus = %v (nulls must be omitted)", out)
	}
	if out := e.must(t, s, "getAuthStatus", map[string]any{"includeToken": true, "refreshToken": false}); methKeys(out) != "requiresOpenaiAuth" {
		t.Errorf("getAuthStatus(includeToken) = %v", out)
	}
	cfg := e.must(t, s, "getUserSavedConfig", nil)
	if c, _ := cfg["config"].(map[string]any); methKeys(cfg) != "config" || c["model"] != "scripted" || c["profiles"] == nil {
		t.Errorf("getUserSavedConfig = %v", cfg)
	}
	if out := e.must(t, s, "userInfo", nil); methKeys(out) != "allegedUserEmail" || out["allegedUserEmail"] != nil {
		t.Errorf("userInfo = %v", out)
	}

	// setDefaultModel writes config.toml; null removes.
	if out := e.must(t, s, "setDefaultModel", map[string]any{"model": "gpt-5", "reasoningEffort": "high"}); len(out) != 0 {
		t.Errorf("setDefaultModel = %v", out)
	}
	c := e.must(t, s, "getUserSavedConfig", nil)["config"].(map[string]any)
	if c["model"] != "gpt-5" || c["modelReasoningEffort"] != "high" {
		t.Errorf("after setDefaultModel: %v", c)
	}
	e.must(t, s, "setDefaultModel", map[string]any{"model": "scripted", "reasoningEffort": nil})
	c = e.must(t, s, "getUserSavedConfig", nil)["config"].(map[string]any)
	if c["model"] != "scripted" || c["modelReasoningEffort"] != nil {
		t.Errorf("after resetting: %v", c)
	}

	// gitDiffToRemote: the workspace is no repository; outside it is refused.
	_, err := e.call(t, s, "gitDiffToRemote", map[string]any{"cwd": e.ws})
	methWantKind(t, err, tools.KindCommandFailed, "failed to compute git diff to remote")
	_, err = e.call(t, s, "gitDiffToRemote", map[string]any{"cwd": "/"})
	methWantKind(t, err, tools.KindPermissionDenied, "outside the workspace")

	nc := e.must(t, s, "newConversation", map[string]any{"cwd": e.ws})
	id, _ := nc["conversationId"].(string)
	path, _ := nc["rolloutPath"].(string)
	if methKeys(nc) != "conversationId,model,rolloutPath" || !validThreadID(id) || nc["model"] != "scripted" ||
		!strings.HasPrefix(path, e.ms.s.homes.root) || !strings.HasSuffix(path, id+".jsonl") {
		t.Errorf("newConversation = %v", nc)
	}
	_, err = e.call(t, s, "newConversation", map[string]any{"cwd": "/etc"})
	methWantKind(t, err, tools.KindPermissionDenied, "outside the workspace")

	// Unknown ids, as the old server answered them.
	zero := "00000000-0000-0000-0000-000000000000"
	for _, name := range []string{"addConversationListener", "interruptConversation"} {
		_, err = e.call(t, s, name, map[string]any{"conversationId": zero})
		methWantKind(t, err, tools.KindNotFound, "conversation not found: "+zero)
	}
	_, err = e.call(t, s, "sendUserMessage", map[string]any{"conversationId": zero,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "hi"}}}})
	methWantKind(t, err, tools.KindNotFound, "conversation not found: "+zero)
	_, err = e.call(t, s, "removeConversationListener", map[string]any{"subscriptionId": zero})
	methWantKind(t, err, tools.KindNotFound, "subscription not found: "+zero)
	_, err = e.call(t, s, "archiveConversation", map[string]any{"conversationId": id, "rolloutPath": "/tmp/x.jsonl"})
	methWantKind(t, err, tools.KindPermissionDenied, "must be in sessions directory")
	_, err = e.call(t, s, "cancelLoginChatGpt", map[string]any{"loginId": zero})
	methWantKind(t, err, tools.KindNotFound, "login id not found")

	// Interrupting a conversation with no turn answers at once.
	if out := e.must(t, s, "interruptConversation", map[string]any{"conversationId": id}); out["abortReason"] != "interrupted" {
		t.Errorf("interruptConversation = %v", out)
	}
	if n := len(e.pids); n != 1 {
		t.Errorf("%d Codex processes for one session", n)
	}
}

// TestMethodsLogin signs in with an API key and out again: the auth
// notifications arrive, and the key is in none of them.
func TestMethodsLogin(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{})
	s := &methSession{id: "s1"}
	const key = "sk-test-secret-123456"
	if out := e.must(t, s, "loginApiKey", map[string]any{"apiKey": key}); len(out) != 0 {
		t.Fatalf("loginApiKey = %v", out)
	}
	if n := s.waitFor(t, "authStatusChange", 10*time.Second); n["authMethod"] != "apikey" {
		t.Errorf("authStatusChange = %v", n)
	}
	if out := e.must(t, s, "logoutChatGpt", nil); len(out) != 0 {
		t.Fatalf("logoutChatGpt = %v", out)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		var last map[string]any
		count := 0
		for _, n := range s.notes {
			if n.method == "authStatusChange" {
				count, last = count+1, n.params
			}
		}
		s.mu.Unlock()
		if count >= 2 {
			if len(last) != 0 {
				t.Errorf("authStatusChange after logout = %v", last)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no authStatusChange after logout: %q", s.methods())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.notes {
		if b, _ := json.Marshal(n.params); strings.Contains(string(b), key) {
			t.Errorf("notification %s carries the key", n.method)
		}
	}
}

// TestMethodsTurnWithListener: newConversation, addConversationListener,
// sendUserTurn, and codex/event/task_complete arrives.
func TestMethodsTurnWithListener(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{})
	s := &methSession{id: "s1"}
	id := e.must(t, s, "newConversation", nil)["conversationId"].(string)
	sub := e.must(t, s, "addConversationListener", map[string]any{"conversationId": id})
	subID, _ := sub["subscriptionId"].(string)
	if methKeys(sub) != "subscriptionId" || !validThreadID(subID) {
		t.Fatalf("addConversationListener = %v", sub)
	}
	out := e.must(t, s, "sendUserTurn", map[string]any{"conversationId": id,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "hello"}}},
		"cwd":   e.ws, "approvalPolicy": "never", "sandboxPolicy": map[string]any{"mode": "read-only"},
		"model": "scripted", "effort": "low", "summary": "auto"})
	if len(out) != 0 {
		t.Fatalf("sendUserTurn = %v", out)
	}
	done := s.waitFor(t, "codex/event/task_complete", time.Minute)
	msg, _ := done["msg"].(map[string]any)
	if done["conversationId"] != id || done["id"] != "0" || msg["type"] != "task_complete" || msg["last_agent_message"] != "answer 1" {
		t.Errorf("task_complete = %v", done)
	}
	for _, want := range []string{"codex/event/task_started", "codex/event/agent_message"} {
		s.waitFor(t, want, time.Second)
	}

	// A second turn through sendUserMessage; its events carry id "1".
	e.must(t, s, "sendUserMessage", map[string]any{"conversationId": id,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "again"}}}})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		var got map[string]any
		for _, n := range s.notes {
			if n.method == "codex/event/task_complete" && n.params["id"] == "1" {
				got = n.params
			}
		}
		s.mu.Unlock()
		if got != nil {
			if m := got["msg"].(map[string]any); m["last_agent_message"] != "answer 2" {
				t.Errorf("second task_complete = %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second turn did not complete: %q", s.methods())
		}
	}

	if out := e.must(t, s, "removeConversationListener", map[string]any{"subscriptionId": subID}); len(out) != 0 {
		t.Errorf("removeConversationListener = %v", out)
	}
	_, err := e.call(t, s, "removeConversationListener", map[string]any{"subscriptionId": subID})
	methWantKind(t, err, tools.KindNotFound, "subscription not found")
}

// TestMethodsInterrupt interrupts a turn the model holds: the answer is
// {abortReason: interrupted} and a listener sees turn_aborted.
func TestMethodsInterrupt(t *testing.T) {
	model := newScriptedModel(t, func(modelRequest) map[string]any { return nil })
	e := methSetup(t, model, MethodOptions{})
	s := &methSession{id: "s1"}
	id := e.must(t, s, "newConversation", nil)["conversationId"].(string)
	e.must(t, s, "addConversationListener", map[string]any{"conversationId": id})
	e.must(t, s, "sendUserMessage", map[string]any{"conversationId": id,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "take your time"}}}})
	select {
	case <-model.got:
	case <-time.After(time.Minute):
		t.Fatal("Codex never asked the model")
	}
	out := e.must(t, s, "interruptConversation", map[string]any{"conversationId": id})
	if methKeys(out) != "abortReason" || out["abortReason"] != "interrupted" {
		t.Fatalf("interruptConversation = %v", out)
	}
	ab := s.waitFor(t, "codex/event/turn_aborted", 10*time.Second)
	if m := ab["msg"].(map[string]any); m["reason"] != "interrupted" || ab["conversationId"] != id {
		t.Errorf("turn_aborted = %v", ab)
	}
}

// turnOnce starts a conversation with one finished turn (so its rollout
// is listed) and returns its id and rollout path.
func (e *methodsEnv) turnOnce(t *testing.T, s *methSession, text string) (string, string) {
	t.Helper()
	nc := e.must(t, s, "newConversation", nil)
	id := nc["conversationId"].(string)
	e.must(t, s, "addConversationListener", map[string]any{"conversationId": id})
	e.must(t, s, "sendUserMessage", map[string]any{"conversationId": id,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": text}}}})
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		s.mu.Lock()
		found := false
		for _, n := range s.notes {
			if n.method == "codex/event/task_complete" && n.params["conversationId"] == id {
				found = true
			}
		}
		s.mu.Unlock()
		if found {
			return id, nc["rolloutPath"].(string)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn of %s did not complete", id)
		}
	}
}

func methListIDs(t *testing.T, out map[string]any) []string {
	t.Helper()
	var ids []string
	for _, it := range out["items"].([]any) {
		m := it.(map[string]any)
		if methKeys(m) != "conversationId,path,preview,timestamp" {
			t.Errorf("summary %v", m)
		}
		ids = append(ids, m["conversationId"].(string))
	}
	return ids
}

// TestMethodsListArchiveResume: pagination, the per-session filter,
// archiving, and resuming another session's conversation once it ended.
func TestMethodsListArchiveResume(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{})
	a, b := &methSession{id: "a"}, &methSession{id: "b"}
	a1, _ := e.turnOnce(t, a, "first")
	a2, a2path := e.turnOnce(t, a, "second")
	a3, _ := e.turnOnce(t, a, "third")
	b1, _ := e.turnOnce(t, b, "bee")

	page := e.must(t, a, "listConversations", map[string]any{"pageSize": 2})
	ids := methListIDs(t, page)
	cursor, _ := page["nextCursor"].(string)
	if len(ids) != 2 || cursor == "" {
		t.Fatalf("first page = %v", page)
	}
	page = e.must(t, a, "listConversations", map[string]any{"pageSize": 2, "cursor": cursor})
	ids = append(ids, methListIDs(t, page)...)
	cursor, _ = page["nextCursor"].(string)
	if len(ids) != 3 || cursor == "" {
		t.Fatalf("second page = %v (like Codex 0.42, a page that lists anything has a cursor)", page)
	}
	// The cursor past the last item leads to an empty page without one.
	page = e.must(t, a, "listConversations", map[string]any{"pageSize": 2, "cursor": cursor})
	if _, more := page["nextCursor"]; more || len(methListIDs(t, page)) != 0 {
		t.Fatalf("third page = %v", page)
	}
	methSort(ids)
	want := []string{a1, a2, a3}
	methSort(want)
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("a lists %v, want %v", ids, want)
	}
	if got := methListIDs(t, e.must(t, b, "listConversations", nil)); len(got) != 1 || got[0] != b1 {
		t.Errorf("b lists %v, want only %s", got, b1)
	}
	_, err := e.call(t, b, "sendUserMessage", map[string]any{"conversationId": a1,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "mine now"}}}})
	methWantKind(t, err, tools.KindNotFound, "conversation not found")
	_, err = e.call(t, b, "resumeConversation", map[string]any{"path": a2path})
	methWantKind(t, err, tools.KindNotFound, "conversation not found")

	// Archive: gone from the list.
	if out := e.must(t, a, "archiveConversation", map[string]any{"conversationId": a1, "rolloutPath": methPath(t, e, a, a1)}); len(out) != 0 {
		t.Fatalf("archiveConversation = %v", out)
	}
	for _, id := range methListIDs(t, e.must(t, a, "listConversations", nil)) {
		if id == a1 {
			t.Error("an archived conversation is still listed")
		}
	}
	_, err = e.call(t, a, "archiveConversation", map[string]any{"conversationId": a2, "rolloutPath": methPath(t, e, a, a3)})
	methWantKind(t, err, tools.KindInvalidArgument, "does not belong")

	// Once a has gone, b may resume a's conversation by its path.
	e.tools["newConversation"].(tools.SessionEnder).SessionEnded("a")
	out := e.must(t, b, "resumeConversation", map[string]any{"path": a2path})
	if out["conversationId"] != a2 || out["model"] != "scripted" || methKeys(out) != "conversationId,initialMessages,model" {
		t.Fatalf("resumeConversation = %v", out)
	}
	first := out["initialMessages"].([]any)[0].(map[string]any)
	if first["type"] != "user_message" || first["message"] != "second" {
		t.Errorf("initialMessages[0] = %v", first)
	}
	if sc := b.waitFor(t, "codex/event", time.Second); sc["msg"].(map[string]any)["type"] != "session_configured" {
		t.Errorf("codex/event after resume = %v", sc)
	}
	e.must(t, b, "sendUserMessage", map[string]any{"conversationId": a2,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "go on"}}}})
	_, err = e.call(t, b, "resumeConversation", map[string]any{"path": "/etc/passwd"})
	methWantKind(t, err, tools.KindPermissionDenied, "must be in sessions directory")
}

// mustPath finds a conversation's rollout path in the list.
func methPath(t *testing.T, e *methodsEnv, s *methSession, id string) string {
	t.Helper()
	for _, it := range e.must(t, s, "listConversations", map[string]any{"pageSize": 100})["items"].([]any) {
		if m := it.(map[string]any); m["conversationId"] == id {
			return m["path"].(string)
		}
	}
	t.Fatalf("%s is not listed", id)
	return ""
}

// TestMethodsShared: with ShareConversations, every session sees and may
// act on every conversation.
func TestMethodsShared(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{ShareConversations: true})
	a, b := &methSession{id: "a"}, &methSession{id: "b"}
	a1, _ := e.turnOnce(t, a, "first")
	if got := methListIDs(t, e.must(t, b, "listConversations", nil)); len(got) != 1 || got[0] != a1 {
		t.Fatalf("b lists %v", got)
	}
	e.must(t, b, "addConversationListener", map[string]any{"conversationId": a1})
	e.must(t, b, "sendUserMessage", map[string]any{"conversationId": a1,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "from b"}}}})
	b.waitFor(t, "codex/event/task_complete", time.Minute)
}

// TestMethodsApproval: Codex's approval question in a turn sendUserTurn
// started reaches the session's client as execCommandApproval, and the
// old answer {decision: approved} lets the command run.
func TestMethodsApproval(t *testing.T) {
	model := newScriptedModel(t, func(req modelRequest) map[string]any {
		for _, it := range req.Input {
			if it["type"] == "function_call_output" {
				return modelMessage("done")
			}
		}
		args, _ := json.Marshal(map[string]any{"cmd": "touch made-by-codex"})
		return map[string]any{"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": string(args)}
	})
	e := methSetup(t, model, MethodOptions{})
	s := &methSession{id: "s1", answer: func(method string, params any) (json.RawMessage, error) {
		return json.RawMessage(`{"decision": "approved"}`), nil
	}}
	id := e.must(t, s, "newConversation", nil)["conversationId"].(string)
	e.must(t, s, "addConversationListener", map[string]any{"conversationId": id})
	e.must(t, s, "sendUserTurn", map[string]any{"conversationId": id,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "make a file"}}},
		"cwd":   e.ws, "approvalPolicy": "untrusted", "sandboxPolicy": map[string]any{"mode": "danger-full-access"},
		"model": "scripted", "summary": "auto"})
	s.waitFor(t, "codex/event/task_complete", time.Minute)
	s.mu.Lock()
	reqs := append([]methNote(nil), s.requests...)
	s.mu.Unlock()
	if len(reqs) != 1 || reqs[0].method != "execCommandApproval" {
		t.Fatalf("client requests = %v", reqs)
	}
	p := reqs[0].params
	if p["conversation_id"] != id || p["call_id"] == "" || p["cwd"] != e.ws ||
		!strings.Contains(fmt.Sprint(p["command"]), "touch made-by-codex") {
		t.Errorf("execCommandApproval params = %v", p)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "made-by-codex")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
}

// TestMethodsSessionEndedStopsCodex: a session's Codex and its process
// group are gone once SessionEnded returns and the stop finished.
func TestMethodsSessionEndedStopsCodex(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{})
	s := &methSession{id: "s1"}
	e.must(t, s, "getUserAgent", nil)
	pid := <-e.pids
	for _, tl := range e.tools { // troupe calls every method's SessionEnded
		tl.(tools.SessionEnder).SessionEnded("s1")
	}
	e.ms.wait()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := syscall.Kill(-pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("ps", "-o", "pid,stat,args", "-g", fmt.Sprint(pid)).CombinedOutput()
			t.Fatalf("Codex's process group %d is still there:\n%s", pid, out)
		}
	}
}

// TestAskDecision maps the old ReviewDecision answers and the standard
// elicitation form to app-server's decisions; failures decline.
func TestAskDecision(t *testing.T) {
	for _, tc := range []struct{ answer, want string }{
		{`{"decision": "approved"}`, "accept"},
		{`{"decision": "approved_for_session"}`, "acceptForSession"},
		{`{"decision": "denied"}`, "decline"},
		{`{"decision": "abort"}`, "cancel"},
		{`{"decision": "maybe"}`, "decline"},
		{`{"action": "accept", "content": {"decision": "approved"}}`, "accept"},
		{`{"action": "accept", "content": {"decision": "approved_for_session"}}`, "acceptForSession"},
		{`{"action": "accept", "content": {"decision": "denied"}}`, "decline"},
		{`{"action": "decline"}`, "decline"},
		{`{"action": "cancel"}`, "cancel"},
		{`not json`, "decline"},
	} {
		answer := tc.answer
		s := &methSession{id: "s", answer: func(string, any) (json.RawMessage, error) { return json.RawMessage(answer), nil }}
		if got := askDecision(context.Background(), s, "execCommandApproval", map[string]any{}); got != tc.want {
			t.Errorf("%s -> %s, want %s", tc.answer, got, tc.want)
		}
	}
	s := &methSession{id: "s"} // the client refuses
	if got := askDecision(context.Background(), s, "execCommandApproval", map[string]any{}); got != "decline" {
		t.Errorf("a refused request -> %s, want decline", got)
	}
}

// TestMethodsPatchApproval: a patch Codex wants to apply is asked about
// as applyPatchApproval with the old file_changes map.
func TestMethodsPatchApproval(t *testing.T) {
	model := newScriptedModel(t, func(req modelRequest) map[string]any {
		for _, it := range req.Input {
			if it["type"] == "function_call_output" {
				return modelMessage("done")
			}
		}
		patch := "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\nEOF\n"
		args, _ := json.Marshal(map[string]any{"cmd": patch})
		return map[string]any{"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": string(args)}
	})
	e := methSetup(t, model, MethodOptions{})
	s := &methSession{id: "s1", answer: func(method string, params any) (json.RawMessage, error) {
		return json.RawMessage(`{"decision": "approved"}`), nil
	}}
	id := e.must(t, s, "newConversation", nil)["conversationId"].(string)
	e.must(t, s, "addConversationListener", map[string]any{"conversationId": id})
	e.must(t, s, "sendUserTurn", map[string]any{"conversationId": id,
		"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "make a file"}}},
		"cwd":   e.ws, "approvalPolicy": "untrusted", "sandboxPolicy": map[string]any{"mode": "read-only"},
		"model": "scripted", "summary": "auto"})
	s.waitFor(t, "codex/event/task_complete", time.Minute)
	s.mu.Lock()
	reqs := append([]methNote(nil), s.requests...)
	s.mu.Unlock()
	if len(reqs) != 1 || reqs[0].method != "applyPatchApproval" {
		t.Fatalf("client requests = %v", reqs)
	}
	p := reqs[0].params
	changes, _ := p["file_changes"].(map[string]any)
	if p["conversation_id"] != id || p["call_id"] == "" || len(changes) != 1 {
		t.Errorf("applyPatchApproval params = %v", p)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "hello.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("the approved patch was not applied: %q %v", b, err)
	}
}

// TestMethodsChatGptLoginCancelled starts a ChatGPT login (Codex opens its
// local callback server and gives the URL a person would open) and
// cancels it: loginChatGptComplete reports it failed, for that login id.
func TestMethodsChatGptLoginCancelled(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{})
	s := &methSession{id: "s1"}
	out := e.must(t, s, "loginChatGpt", nil)
	id, _ := out["loginId"].(string)
	url, _ := out["authUrl"].(string)
	if methKeys(out) != "authUrl,loginId" || id == "" || !strings.HasPrefix(url, "https://") {
		t.Fatalf("loginChatGpt = %v", out)
	}
	if got := e.must(t, s, "cancelLoginChatGpt", map[string]any{"loginId": id}); len(got) != 0 {
		t.Fatalf("cancelLoginChatGpt = %v", got)
	}
	n := s.waitFor(t, "loginChatGptComplete", 10*time.Second)
	if n["loginId"] != id || n["success"] != false {
		t.Fatalf("loginChatGptComplete = %v", n)
	}
}

// TestMethodsBoundCodexProcesses: past MaxProcesses a session that needs
// Codex is refused (unavailable), and gets one once another session ends.
func TestMethodsBoundCodexProcesses(t *testing.T) {
	e := methSetup(t, newScriptedModel(t, methAnswering("answer")), MethodOptions{MaxProcesses: 1})
	a, b := &methSession{id: "a"}, &methSession{id: "b"}
	e.must(t, a, "newConversation", nil)
	_, err := e.call(t, b, "newConversation", nil)
	methWantKind(t, err, tools.KindUnavailable, "codex.max_processes")
	e.tools["newConversation"].(tools.SessionEnder).SessionEnded("a")
	e.must(t, b, "newConversation", nil)
}
