package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Codex's former management methods, served by troupe beside MCP on the
// same connection, driven as the clients of `codex mcp serve` drove them:
// raw JSON-RPC lines over stdio.

// callAnswering sends a request and returns its response; every request
// troupe sends meanwhile (an approval) is answered with answer's value, or
// left unanswered when answer is nil.
func (s *lineServer) callAnswering(id int, method string, params any, answer func(req map[string]any) any) map[string]any {
	s.t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		s.t.Fatal(err)
	}
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("troupe closed stdout while waiting for %s", method)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				s.t.Fatalf("not JSON: %q", l)
			}
			switch {
			case m["method"] != nil && m["id"] != nil && answer != nil:
				b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": answer(m)})
				if _, err := s.in.Write(append(b, '\n')); err != nil {
					s.t.Fatal(err)
				}
			case m["id"] == float64(id) && m["method"] == nil:
				return m
			}
		case <-time.After(30 * time.Second):
			s.t.Fatalf("no answer to %s", method)
		}
	}
}

// TestExecOneOffCommandNeedsApproval: execOneOffCommand asks a person
// through troupe's gate (the old server never asked), answers the old
// shape when approved — in the old servers' answer form too — and runs
// nothing when declined; a client's danger-full-access still gets
// troupe's sandbox.
func TestExecOneOffCommandNeedsApproval(t *testing.T) {
	ws := t.TempDir()
	s := startLineServer(t, ws, "-c", "codex.enabled=false")
	params := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
	if m := s.call(0, "initialize", params); m["error"] != nil {
		t.Fatalf("initialize: %v", m)
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	s.in.Write(append(b, '\n'))

	var asked []string
	approve := func(form any) func(map[string]any) any {
		return func(req map[string]any) any {
			p, _ := req["params"].(map[string]any)
			msg, _ := p["message"].(string)
			asked = append(asked, req["method"].(string)+": "+msg)
			return form
		}
	}
	for i, form := range []any{map[string]any{"decision": "approved"}, map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}} {
		m := s.callAnswering(1+i, "execOneOffCommand", map[string]any{"command": []string{"sh", "-c", "echo hi; echo err >&2; exit 4"},
			"sandboxPolicy": map[string]any{"mode": "danger-full-access"}}, approve(form))
		res, _ := m["result"].(map[string]any)
		if m["error"] != nil || res["exitCode"] != float64(4) || res["stdout"] != "hi\n" || res["stderr"] != "err\n" || len(res) != 3 {
			t.Fatalf("approved with %v: %v", form, m)
		}
	}
	if len(asked) != 2 || !strings.HasPrefix(asked[0], "elicitation/create: ") || !strings.Contains(asked[0], "execOneOffCommand") ||
		!strings.Contains(asked[0], "echo hi") {
		t.Fatalf("the approvals asked: %q", asked)
	}

	outside := t.TempDir()
	escape := filepath.Join(outside, "escaped")
	m := s.callAnswering(3, "execOneOffCommand", map[string]any{"command": []string{"sh", "-c", "echo x > " + escape + " && echo ran"}},
		approve(map[string]any{"decision": "approved"}))
	if res, _ := m["result"].(map[string]any); res["exitCode"] == float64(0) || fileExists(outside, "escaped") {
		t.Fatalf("a write outside the workspace was not refused: %v", m)
	}

	m = s.callAnswering(4, "execOneOffCommand", map[string]any{"command": []string{"touch", "declined-marker"}},
		approve(map[string]any{"decision": "denied"}))
	e, _ := m["error"].(map[string]any)
	if e == nil || e["code"] != float64(-32600) || !strings.Contains(e["message"].(string), "declined") {
		t.Fatalf("declined: %v", m)
	}
	if _, err := os.Stat(filepath.Join(ws, "declined-marker")); err == nil {
		t.Fatal("the declined command ran")
	}
	m = s.call(5, "execOneOffCommand", map[string]any{"command": "not an argv"})
	if e, _ := m["error"].(map[string]any); e == nil || e["code"] != float64(-32602) {
		t.Fatalf("bad params: %v", m)
	}
}

// TestConversationSurvivesARestart: a conversation made through one troupe
// is resumed through the next (Codex persisted it), listened to and
// continued, and the model sees its history.
func TestConversationSurvivesARestart(t *testing.T) {
	bin := codexBinary(t)
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		raw, _ := json.Marshal(req.Input)
		if strings.Contains(string(raw), "after restart") {
			if strings.Contains(string(raw), "answer one") {
				return message("answer two")
			}
			return message("history missing")
		}
		return message("answer one")
	})
	home, ws := scriptedCodexHome(t, model), t.TempDir()
	start := func() *flowPeer {
		cmd := exec.Command(troupeBinary(t), "serve", "--workspace", ws, "-c", fmt.Sprintf("codex.binary=%q", bin))
		cmd.Env, cmd.Dir = peerEnv(home), ws
		p := &flowPeer{t: t, s: startPeer(t, cmd, true)}
		init := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
		if m := p.call("initialize", init); m["error"] != nil {
			t.Fatalf("initialize: %v", m)
		}
		p.s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return p
	}
	result := func(m map[string]any) map[string]any {
		t.Helper()
		res, ok := m["result"].(map[string]any)
		if !ok {
			t.Fatalf("want a result, got %v", m)
		}
		return res
	}

	first := start()
	conv := result(first.call("newConversation", map[string]any{"cwd": ws}))
	cid, rollout := conv["conversationId"].(string), conv["rolloutPath"].(string)
	result(first.call("addConversationListener", map[string]any{"conversationId": cid}))
	result(first.call("sendUserMessage", map[string]any{"conversationId": cid, "items": textItems("first question")}))
	first.waitEvent("task_complete", cid)
	first.s.stdin.Close()
	if ok, err := first.s.waitExit(20 * time.Second); !ok || err != nil {
		t.Fatalf("the first troupe did not exit cleanly (%v); its log:\n%s", err, first.s.stderrText())
	}

	second := start()
	resumed := result(second.call("resumeConversation", map[string]any{"path": rollout}))
	if resumed["conversationId"] != cid || resumed["model"] == nil {
		t.Fatalf("resumeConversation: %v", resumed)
	}
	result(second.call("addConversationListener", map[string]any{"conversationId": cid}))
	result(second.call("sendUserMessage", map[string]any{"conversationId": cid, "items": textItems("after restart")}))
	if done := second.waitEvent("task_complete", cid); !strings.Contains(fmt.Sprint(done), "answer two") {
		t.Fatalf("the resumed conversation ended with %v", done)
	}
	if list := result(second.call("listConversations", map[string]any{})); !strings.Contains(fmt.Sprint(list["items"]), cid) {
		t.Fatalf("the resumed conversation is not listed: %v", list)
	}
	// troupe ends when its input does, its sessions' Codex with it.
	second.s.stdin.Close()
	if ok, err := second.s.waitExit(20 * time.Second); !ok || err != nil {
		t.Fatalf("the second troupe did not exit cleanly (%v); its log:\n%s", err, second.s.stderrText())
	}
}

// waitExit waits up to d for the peer to exit and returns how it did;
// false if it is still running. The exit stays readable for the peer's
// cleanup.
func (s *stdioServer) waitExit(d time.Duration) (bool, error) {
	select {
	case err := <-s.exited:
		s.exited <- err
		return true, err
	case <-time.After(d):
		return false, nil
	}
}

// TestManagementMethodsOverHTTP: the methods are served on an HTTP session
// too, behind the bearer token, and their answers are JSON-RPC responses
// on the request's POST.
func TestManagementMethodsOverHTTP(t *testing.T) {
	bin := codexBinary(t)
	t.Setenv("CODEX_HOME", scriptedCodexHome(t, nil))
	t.Setenv("RUST_BACKTRACE", "")
	ws, token := t.TempDir(), newToken(t)
	srv := startHTTPServer(t, ws, token, "-c", fmt.Sprintf("codex.binary=%q", bin))
	post := func(session, body string) (*http.Response, map[string]any) {
		t.Helper()
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"Mcp-Protocol-Version": "2025-06-18"}
		if session != "" {
			h["Mcp-Session-Id"] = session
		}
		resp := srv.request(t, http.MethodPost, strings.NewReader(body), h)
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		for _, line := range strings.Split(string(raw), "\n") {
			line = strings.TrimPrefix(strings.TrimSpace(line), "data:")
			if json.Unmarshal([]byte(line), &m) == nil && m["id"] != nil {
				return resp, m
			}
		}
		return resp, nil
	}
	resp, m := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"orchestrator","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if m == nil || m["error"] != nil || session == "" {
		t.Fatalf("initialize: %v", m)
	}
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if _, m = post(session, `{"jsonrpc":"2.0","id":2,"method":"getUserAgent"}`); m == nil || m["error"] != nil {
		t.Fatalf("getUserAgent: %v", m)
	}
	if ua, _ := m["result"].(map[string]any)["userAgent"].(string); ua == "" {
		t.Fatalf("getUserAgent: %v", m)
	}
	_, m = post(session, `{"jsonrpc":"2.0","id":3,"method":"newConversation","params":{}}`)
	if res, _ := m["result"].(map[string]any); res["conversationId"] == nil {
		t.Fatalf("newConversation: %v", m)
	}
	srv.token = ""
	if resp := srv.request(t, http.MethodPost, strings.NewReader(`{"jsonrpc":"2.0","id":4,"method":"getUserAgent"}`),
		map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream", "Mcp-Session-Id": session}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %s", resp.Status)
	}
}

// TestFeatureGateKeepsCodexsSurface: with features.enable_mcp_server_surface
// on and off, troupe serves the same codex and codex-reply (names, input
// schemas) and the same management methods; only the approval differs (on:
// troupe asks before a codex call).
func TestFeatureGateKeepsCodexsSurface(t *testing.T) {
	bin := codexBinary(t)
	type surface struct {
		tools     map[string]string // name → input schema
		approval  map[string]any    // name → _meta approval hint
		userAgent string
	}
	look := func(gate bool) surface {
		ws := t.TempDir()
		cmd := exec.Command(troupeBinary(t), "serve", "--workspace", ws, "-c", fmt.Sprintf("codex.binary=%q", bin),
			"-c", fmt.Sprintf("features.enable_mcp_server_surface=%v", gate))
		cmd.Env, cmd.Dir = peerEnv(scriptedCodexHome(t, nil)), ws
		p := &flowPeer{t: t, s: startPeer(t, cmd, true)}
		init := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
		p.call("initialize", init)
		p.s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		list, _ := p.call("tools/list", nil)["result"].(map[string]any)
		out := surface{tools: map[string]string{}, approval: map[string]any{}}
		for _, x := range list["tools"].([]any) {
			tool := x.(map[string]any)
			name := tool["name"].(string)
			if name != "codex" && name != "codex-reply" {
				continue
			}
			b, _ := json.Marshal(tool["inputSchema"])
			out.tools[name] = string(b)
			meta, _ := tool["_meta"].(map[string]any)
			out.approval[name] = meta["dev.troupe/requires_approval"]
		}
		res, _ := p.call("getUserAgent", nil)["result"].(map[string]any)
		out.userAgent, _ = res["userAgent"].(string)
		return out
	}
	on, off := look(true), look(false)
	if len(on.tools) != 2 || len(off.tools) != 2 {
		t.Fatalf("codex tools served: on %v, off %v", on.tools, off.tools)
	}
	for name, schema := range on.tools {
		if off.tools[name] != schema {
			t.Errorf("%s's input schema differs:\n on:  %s\n off: %s", name, schema, off.tools[name])
		}
	}
	if on.userAgent == "" || off.userAgent == "" {
		t.Errorf("getUserAgent: on %q, off %q", on.userAgent, off.userAgent)
	}
	if on.approval["codex"] != true || off.approval["codex"] == true {
		t.Errorf("approval: on %v, off %v", on.approval, off.approval)
	}
}

// TestAPIKeyStaysOutOfLogs: an API key given to loginApiKey reaches Codex
// (getAuthStatus shows the asking session it is in use) and never troupe's
// log, even at debug level, nor the audit log, which still records the
// call.
func TestAPIKeyStaysOutOfLogs(t *testing.T) {
	bin := codexBinary(t)
	const key = "sk-troupe-e2e-marker-4f1c9a"
	ws, audit := t.TempDir(), filepath.Join(t.TempDir(), "audit.jsonl")
	cmd := exec.Command(troupeBinary(t), "serve", "--workspace", ws, "--log-level", "debug", "-c", fmt.Sprintf("codex.binary=%q", bin),
		"-c", fmt.Sprintf("audit.path=%q", audit))
	// Codex's own provider (no config.toml): OpenAI auth is what it uses.
	// Nothing here reaches a model.
	cmd.Env, cmd.Dir = peerEnv(t.TempDir()), ws
	p := &flowPeer{t: t, s: startPeer(t, cmd, true)}
	init := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
	p.call("initialize", init)
	p.s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m := p.call("loginApiKey", map[string]any{"apiKey": key}); m["error"] != nil {
		t.Fatalf("loginApiKey: %v", m)
	}
	status, _ := p.call("getAuthStatus", map[string]any{"includeToken": true})["result"].(map[string]any)
	if status["authMethod"] != "apikey" || status["authToken"] != key {
		t.Fatalf("getAuthStatus: %v", status)
	}
	if m := p.call("loginApiKey", map[string]any{"apiKey": ""}); m["error"] == nil {
		t.Fatalf("an empty key was accepted: %v", m)
	}
	if m := p.call("logoutChatGpt", nil); m["error"] != nil {
		t.Fatalf("logoutChatGpt: %v", m)
	}
	p.s.stdin.Close()
	if ok, err := p.s.waitExit(20 * time.Second); !ok || err != nil {
		t.Fatalf("troupe did not exit cleanly (%v)", err)
	}
	if strings.Contains(p.s.stderrText(), key) {
		t.Fatalf("troupe's log holds the API key:\n%s", p.s.stderrText())
	}
	b, err := os.ReadFile(audit)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), key) || !strings.Contains(string(b), `"tool":"loginApiKey"`) || !strings.Contains(string(b), `"tool":"logoutChatGpt"`) {
		t.Fatalf("the audit log holds the key or lacks the calls:\n%s", b)
	}
	if changes := strings.Join(p.other, " "); !strings.Contains(changes, "authStatusChange") {
		t.Fatalf("no authStatusChange notification: %s", changes)
	}
}

// TestDeniedToolsRefuseTheirMethods: tools.deny governs the management
// methods as it governs the tools. With shell.exec, codex and codex-reply
// denied, newConversation (even asking for a program in Codex's config),
// getUserAgent and execOneOffCommand are "method not found" (-32601)
// before anything starts: no approval is asked and Codex is not run. With
// only shell.exec denied, Codex's methods are served again (the real
// Codex answers getUserAgent) and execOneOffCommand is still refused.
func TestDeniedToolsRefuseTheirMethods(t *testing.T) {
	bin := codexBinary(t)
	t.Setenv("CODEX_HOME", scriptedCodexHome(t, nil))
	t.Setenv("RUST_BACKTRACE", "")
	outside := t.TempDir()
	pwned := filepath.Join(outside, "pwned")
	init := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"elicitation": map[string]any{}},
		"clientInfo": map[string]any{"name": "orchestrator", "version": "1"}}
	start := func(deny string) *lineServer {
		s := startLineServer(t, t.TempDir(), "-c", fmt.Sprintf("codex.binary=%q", bin), "-c", "tools.deny="+deny)
		if m := s.call(0, "initialize", init); m["error"] != nil {
			t.Fatalf("initialize: %v", m)
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		s.in.Write(append(b, '\n'))
		return s
	}
	var asked []string
	approve := func(req map[string]any) any {
		asked = append(asked, fmt.Sprint(req["method"]))
		return map[string]any{"decision": "approved"}
	}
	refused := func(s *lineServer, id int, method string, params any) {
		t.Helper()
		m := s.callAnswering(id, method, params, approve)
		e, _ := m["error"].(map[string]any)
		if e == nil || e["code"] != float64(-32601) || !strings.Contains(fmt.Sprint(e["message"]), "method not found: "+method) {
			t.Errorf("%s: %v, want -32601 method not found", method, m)
		}
	}

	s := start(`["shell.exec","codex","codex-reply"]`)
	refused(s, 1, "newConversation", map[string]any{"sandbox": "read-only",
		"config": map[string]any{"mcp_servers.p.command": "/bin/sh", "mcp_servers.p.args": []string{"-c", "id > " + pwned}}})
	refused(s, 2, "getUserAgent", map[string]any{})
	refused(s, 3, "execOneOffCommand", map[string]any{"command": []string{"sh", "-c", "id > " + pwned}})
	if len(asked) != 0 {
		t.Errorf("denied methods asked for approval: %v", asked)
	}
	time.Sleep(500 * time.Millisecond) // a program started anyway would have written by now
	if fileExists(outside, "pwned") {
		t.Fatal("a denied method ran a program")
	}
	s.stop()

	s = start(`["shell.exec"]`)
	m := s.call(1, "getUserAgent", map[string]any{})
	if ua, _ := m["result"].(map[string]any)["userAgent"].(string); ua == "" {
		t.Fatalf("getUserAgent with codex allowed: %v", m)
	}
	refused(s, 2, "execOneOffCommand", map[string]any{"command": []string{"sh", "-c", "id > " + pwned}})
	if len(asked) != 0 || fileExists(outside, "pwned") {
		t.Fatalf("execOneOffCommand with shell.exec denied asked %v or ran", asked)
	}
}
