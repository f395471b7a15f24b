package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// Parity with the Codex releases whose MCP servers troupe replaces: the
// same requests go to the old server and to troupe, and the answers must
// have the same shape (members, their JSON types, error codes). Values
// differ where they must (ids, user agents, the model's name).

// codexRef returns the launcher of a pinned old Codex release (e2e/codexref,
// installed by scripts/test): "0.42" or "0.153".
func codexRef(t *testing.T, release string) string {
	t.Helper()
	js := filepath.Join(moduleRoot, "e2e", "codexref", "node_modules", "codex-"+release, "bin", "codex.js")
	if _, err := os.Stat(js); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: scripts/test should have installed it", js)
		}
		t.Skip("the reference Codex releases are not installed: run scripts/test")
	}
	return js
}

// scriptedCodexHome makes a CODEX_HOME whose config.toml points Codex at
// model (nil: a provider nobody answers, for methods that need no model).
func scriptedCodexHome(t *testing.T, model *scriptedModel) string {
	t.Helper()
	home := t.TempDir()
	url := "http://127.0.0.1:9/v1"
	if model != nil {
		url = model.baseURL()
	}
	cfg := fmt.Sprintf("model = \"scripted\"\nmodel_provider = \"scripted\"\n\n[model_providers.scripted]\nname = \"scripted\"\nbase_url = %q\nwire_api = \"responses\"\n", url)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// peerEnv is the small environment both servers run with.
func peerEnv(home string) []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "LANG=C.UTF-8",
		"XDG_STATE_HOME=" + stateHome}
}

// rpc sends a request to s and returns its response, or nil when none
// came within wait (the old server answered some requests with nothing);
// notifications and requests in between are skipped.
func rpc(s *stdioServer, id int, method string, params any, wait time.Duration) map[string]any {
	s.t.Helper()
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	s.send(string(b))
	deadline := time.After(wait)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("%s closed stdout", filepath.Base(s.cmd.Path))
			}
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["method"] == nil && m["id"] == float64(id) {
				return m
			}
		case <-deadline:
			return nil
		}
	}
}

// shape describes a JSON value's structure: member names and JSON types,
// arrays by their first element.
func shape(v any) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + ":" + shape(x[k])
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return "[" + shape(x[0]) + "]"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// answerShape is a response's shape: its result's, or its error code.
func answerShape(m map[string]any) string {
	if m == nil {
		return "no answer"
	}
	if e, ok := m["error"].(map[string]any); ok {
		return fmt.Sprintf("error %v", e["code"])
	}
	return shape(m["result"])
}

// TestManagementMethodsMatchCodex042: the management methods that need no
// model answer in the shapes `codex mcp serve` 0.42.0 answered, with
// troupe bridging to the installed Codex's app-server. Where the old
// server answered nothing (an unknown method, bad params), troupe answers
// a JSON-RPC error: the one deliberate difference.
func TestManagementMethodsMatchCodex042(t *testing.T) {
	old := codexRef(t, "0.42")
	bin := codexBinary(t)
	repo := gitRepoWithRemote(t)
	type probe struct {
		method string
		params any
	}
	probes := []probe{
		{"getUserAgent", nil},
		{"getAuthStatus", map[string]any{}},
		{"getAuthStatus", map[string]any{"includeToken": true, "refreshToken": false}},
		{"getUserSavedConfig", nil},
		{"userInfo", nil},
		{"listConversations", map[string]any{}},
		{"newConversation", map[string]any{}},
		{"newConversation", map[string]any{"approvalPolicy": "never", "sandbox": "read-only", "cwd": repo}},
		{"listConversations", map[string]any{"pageSize": 1}},
		{"gitDiffToRemote", map[string]any{"cwd": repo}},
		{"gitDiffToRemote", map[string]any{"cwd": t.TempDir()}},
		{"addConversationListener", map[string]any{"conversationId": "0199a213-81c0-7800-8aa1-bbab2a035a53"}},
		{"removeConversationListener", map[string]any{"subscriptionId": "0199a213-81c0-7800-8aa1-bbab2a035a53"}},
		{"interruptConversation", map[string]any{"conversationId": "0199a213-81c0-7800-8aa1-bbab2a035a53"}},
		{"sendUserMessage", map[string]any{"conversationId": "0199a213-81c0-7800-8aa1-bbab2a035a53",
			"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "hi"}}}}},
	}
	answers := func(s *stdioServer) []string {
		init := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"elicitation": map[string]any{}},
			"clientInfo": map[string]any{"name": "parity", "version": "1"}}
		if m := rpc(s, 0, "initialize", init, 20*time.Second); m == nil || m["error"] != nil {
			t.Fatalf("initialize: %v", m)
		}
		s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		var out []string
		for i, p := range probes {
			out = append(out, answerShape(rpc(s, i+1, p.method, p.params, 15*time.Second)))
		}
		return out
	}

	oldCmd := exec.Command("node", old, "mcp", "serve")
	oldCmd.Env, oldCmd.Dir = peerEnv(scriptedCodexHome(t, nil)), repo
	want := answers(startPeer(t, oldCmd, false))

	troupe := exec.Command(troupeBinary(t), "serve", "--workspace", repo, "-c", fmt.Sprintf("codex.binary=%q", bin))
	troupe.Env, troupe.Dir = peerEnv(scriptedCodexHome(t, nil)), repo
	got := answers(startPeer(t, troupe, true))
	for i, p := range probes {
		if got[i] != want[i] {
			t.Errorf("%s %v:\n codex 0.42: %s\n troupe:     %s", p.method, p.params, want[i], got[i])
		}
	}
}

// gitRepoWithRemote makes a git repository with an origin whose main
// branch it tracks, and a change on top: what gitDiffToRemote reports.
func gitRepoWithRemote(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	origin, repo := filepath.Join(root, "origin.git"), filepath.Join(root, "repo")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+root)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(root, "init", "-q", "--bare", "-b", "main", origin)
	git(root, "init", "-q", "-b", "main", repo)
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(repo, "add", "a.txt")
	git(repo, "commit", "-q", "-m", "one")
	git(repo, "remote", "add", "origin", origin)
	git(repo, "push", "-q", "-u", "origin", "main")
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return repo
}

// flowPeer drives one server (old Codex or troupe) through a conversation
// and collects what it saw.
type flowPeer struct {
	t      *testing.T
	s      *stdioServer
	nextID int
	events []map[string]any // codex/event/<type> notifications, in order
	waited int              // events[:waited] have been looked through by waitEvent
	other  []string         // other notification methods
}

// call sends a request and waits for its answer, keeping the
// notifications that arrive meanwhile.
func (p *flowPeer) call(method string, params any) map[string]any {
	p.t.Helper()
	p.nextID++
	id := p.nextID
	req := map[string]any{"jsonrpc": "2.0", "id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	b, _ := json.Marshal(req)
	p.s.send(string(b))
	for {
		m := p.read(60 * time.Second)
		if m == nil {
			p.t.Fatalf("no answer to %s", method)
		}
		if m["method"] == nil && m["id"] == float64(id) {
			return m
		}
	}
}

// read returns the next message within wait (nil if none), recording
// notifications.
func (p *flowPeer) read(wait time.Duration) map[string]any {
	p.t.Helper()
	select {
	case l, ok := <-p.s.lines:
		if !ok {
			p.t.Fatalf("%s closed stdout", filepath.Base(p.s.cmd.Path))
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			p.t.Fatalf("not JSON: %q", l)
		}
		if method, _ := m["method"].(string); method != "" && m["id"] == nil {
			if strings.HasPrefix(method, "codex/event/") {
				params, _ := m["params"].(map[string]any)
				params["@type"] = strings.TrimPrefix(method, "codex/event/")
				p.events = append(p.events, params)
			} else {
				p.other = append(p.other, method)
			}
		}
		return m
	case <-time.After(wait):
		return nil
	}
}

// waitEvent returns the next codex/event/<typ> for conversation cid after
// the last one it returned, reading until it arrives.
func (p *flowPeer) waitEvent(typ, cid string) map[string]any {
	p.t.Helper()
	for {
		for ; p.waited < len(p.events); p.waited++ {
			if ev := p.events[p.waited]; ev["@type"] == typ && ev["conversationId"] == cid {
				p.waited++
				return ev
			}
		}
		if p.read(90*time.Second) == nil {
			p.t.Fatalf("no %s event for %s; saw %v", typ, cid, p.eventTypes())
		}
	}
}

func (p *flowPeer) eventTypes() []string {
	seen := map[string]bool{}
	var out []string
	for _, ev := range p.events {
		if typ := ev["@type"].(string); !seen[typ] {
			seen[typ] = true
			out = append(out, typ)
		}
	}
	return out
}

func textItems(text string) []any {
	return []any{map[string]any{"type": "text", "data": map[string]any{"text": text}}}
}

// conversationFlow is the scenario both servers run: a conversation with a
// listener, two turns, a listing, an interrupted turn, and archiving. It
// returns the shapes of the answers, in order, for comparison.
func conversationFlow(t *testing.T, p *flowPeer, ws string, release chan struct{}) []string {
	init := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
	if m := p.call("initialize", init); m["error"] != nil {
		t.Fatalf("initialize: %v", m)
	}
	p.s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var shapes []string
	record := func(what string, m map[string]any) map[string]any {
		shapes = append(shapes, what+" "+answerShape(m))
		res, _ := m["result"].(map[string]any)
		return res
	}
	conv := record("newConversation", p.call("newConversation", map[string]any{"approvalPolicy": "never", "sandbox": "read-only", "cwd": ws}))
	cid, _ := conv["conversationId"].(string)
	rollout, _ := conv["rolloutPath"].(string)
	if cid == "" || rollout == "" {
		t.Fatalf("newConversation: %v", conv)
	}
	sub := record("addConversationListener", p.call("addConversationListener", map[string]any{"conversationId": cid}))
	turn := map[string]any{"conversationId": cid, "items": textItems("first question"), "cwd": ws, "approvalPolicy": "never",
		"sandboxPolicy": map[string]any{"mode": "read-only"}, "model": "scripted", "effort": "medium", "summary": "auto"}
	record("sendUserTurn", p.call("sendUserTurn", turn))
	if done := p.waitEvent("task_complete", cid); !strings.Contains(fmt.Sprint(done), "answer one") {
		t.Errorf("first turn ended with %v", done)
	}
	record("sendUserMessage", p.call("sendUserMessage", map[string]any{"conversationId": cid, "items": textItems("second question")}))
	if done := p.waitEvent("task_complete", cid); !strings.Contains(fmt.Sprint(done), "answer two") {
		t.Errorf("second turn ended with %v (the model must see the first turn)", done)
	}
	list := record("listConversations", p.call("listConversations", map[string]any{"pageSize": 10}))
	if !strings.Contains(fmt.Sprint(list["items"]), cid) {
		t.Errorf("listConversations does not list %s: %v", cid, list)
	}
	// A turn the model never finishes, interrupted.
	turn["items"] = textItems("slow question")
	record("sendUserTurn", p.call("sendUserTurn", turn))
	p.waitEvent("task_started", cid)
	aborted := record("interruptConversation", p.call("interruptConversation", map[string]any{"conversationId": cid}))
	if aborted["abortReason"] != "interrupted" {
		t.Errorf("interruptConversation: %v", aborted)
	}
	p.waitEvent("turn_aborted", cid)
	record("removeConversationListener", p.call("removeConversationListener", map[string]any{"subscriptionId": sub["subscriptionId"]}))
	record("archiveConversation", p.call("archiveConversation", map[string]any{"conversationId": cid, "rolloutPath": rollout}))
	list = record("listConversations", p.call("listConversations", map[string]any{}))
	if strings.Contains(fmt.Sprint(list["items"]), cid) {
		t.Errorf("an archived conversation is still listed: %v", list)
	}
	return shapes
}

// slowModel answers "answer one" / "answer two" (when it sees the first
// turn in the history), and holds a "slow question" until release closes.
func slowModel(t *testing.T) (*scriptedModel, chan struct{}) {
	release := make(chan struct{})
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		raw, _ := json.Marshal(req.Input)
		switch {
		case strings.Contains(string(raw), "slow question"):
			<-release
			return message("too late")
		case strings.Contains(string(raw), "second question"):
			if strings.Contains(string(raw), "answer one") {
				return message("answer two")
			}
			return message("history missing")
		}
		return message("answer one")
	})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the server closes (cleanups run last first)
	return model, release
}

// TestConversationFlowMatchesCodex042: newConversation → listener →
// sendUserTurn → events → the turn completes, a second turn with history,
// listConversations, interruptConversation, archiveConversation: troupe
// (bridging to Codex 0.169's app-server) answers in the shapes `codex mcp
// serve` 0.42.0 did, and sends the events a listener of that server got.
func TestConversationFlowMatchesCodex042(t *testing.T) {
	old := codexRef(t, "0.42")
	bin := codexBinary(t)

	oldModel, oldRelease := slowModel(t)
	oldWS := t.TempDir()
	oldCmd := exec.Command("node", old, "mcp", "serve")
	oldCmd.Env, oldCmd.Dir = peerEnv(scriptedCodexHome(t, oldModel)), oldWS
	oldPeer := &flowPeer{t: t, s: startPeer(t, oldCmd, false)}
	want := conversationFlow(t, oldPeer, oldWS, oldRelease)

	model, release := slowModel(t)
	ws := t.TempDir()
	cmd := exec.Command(troupeBinary(t), "serve", "--workspace", ws, "-c", fmt.Sprintf("codex.binary=%q", bin))
	cmd.Env, cmd.Dir = peerEnv(scriptedCodexHome(t, model)), ws
	p := &flowPeer{t: t, s: startPeer(t, cmd, true)}
	got := conversationFlow(t, p, ws, release)

	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("answers differ:\n codex 0.42:\n  %s\n troupe:\n  %s", strings.Join(want, "\n  "), strings.Join(got, "\n  "))
	}
	// Every kind of event a listener of the old server got in this flow
	// reaches troupe's listener too. troupe may send more (user_message,
	// warning: later releases' events, which old clients skip by name).
	gotTypes := map[string]bool{}
	for _, typ := range p.eventTypes() {
		gotTypes[typ] = true
	}
	for _, typ := range oldPeer.eventTypes() {
		if !gotTypes[typ] {
			t.Errorf("codex 0.42 sent codex/event/%s in this flow, troupe did not (it sent %v)", typ, p.eventTypes())
		}
	}
	t.Logf("event types: codex 0.42 %v; troupe %v", oldPeer.eventTypes(), p.eventTypes())
}
