package actors

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/audit"
	"troupe/overrides"
	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/command"
	"troupe/workspace"
)

// overrideFixture is a workspace with a sub directory, a file, and a
// symlink that leads out of it, opened as a workspace.Root.
func overrideFixture(t *testing.T) (*workspace.Root, string) {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"sub/deeper"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, dir
}

// showTool is a real command tool: sh prints its working directory
// (relative to the workspace) and the session's variables.
func showTool(t *testing.T, dir string, approval bool) tools.Tool {
	t.Helper()
	name := "show"
	if approval {
		name = "gated"
	}
	tool, err := command.New(command.Definition{
		Name: name, Description: "Shows where it runs.", Command: "sh",
		Args:           []string{"-c", `echo "cwd=$(pwd -P)" "greeting=$GREETING" "other=$OTHER"`},
		SandboxProfile: "none", RequiresApproval: approval,
	}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// initializeSession sends initialize with the session _meta; it returns
// the raw answer.
func (c *client) initializeSession(id int, session any, caps map[string]any) msg {
	c.t.Helper()
	params := map[string]any{"protocolVersion": "2025-06-18", "capabilities": caps,
		"clientInfo": map[string]any{"name": "test", "version": "1"}}
	if session != nil {
		params["_meta"] = map[string]any{overrides.MetaKey: session}
	}
	c.request(id, "initialize", params)
	return c.recv()
}

func (c *client) callText(id int, tool string) string {
	c.t.Helper()
	c.request(id, "tools/call", map[string]any{"name": tool})
	r := c.toolResult(c.recv())
	if r.IsError {
		c.t.Fatalf("%s failed: %s", tool, errorText(r))
	}
	return strings.TrimSpace(errorText(r))
}

// inWorkspace is s with the workspace's host path cut out of it.
func inWorkspace(s, dir string) string { return strings.ReplaceAll(s, dir, "") }

func (c *client) sessionMeta(id int) map[string]any {
	c.t.Helper()
	c.request(id, "tools/list", nil)
	m := c.recv()
	var res struct {
		Meta map[string]map[string]any `json:"_meta"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil {
		c.t.Fatalf("tools/list: %s", m.raw)
	}
	return res.Meta[overrides.MetaKey]
}

// TestSessionOverridesOffByDefault: a client asking for its own cwd or env
// on a server that does not allow it is refused with a message that says
// how the operator allows it; one that asks for nothing is served.
func TestSessionOverridesOffByDefault(t *testing.T) {
	ws, dir := overrideFixture(t)
	c := newClient(t, Options{Session: SessionOptions{Overrides: overrides.Policy{Workspace: ws}}}, showTool(t, dir, false))
	m := c.initializeSession(0, map[string]any{"cwd": "sub", "env": map[string]string{"GREETING": "hi"}}, nil)
	if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams ||
		!strings.Contains(m.Error.Message, "allow_overrides = true") || !strings.Contains(m.Error.Message, overrides.MetaKey) {
		t.Fatalf("want a refusal naming [sessions] allow_overrides, got %s", m.raw)
	}
	// The session was not initialized by the refused request.
	if m := c.initializeSession(1, nil, nil); m.Error != nil {
		t.Fatalf("initialize without overrides: %s", m.raw)
	}
	if got := inWorkspace(c.callText(2, "show"), dir); got != "cwd= greeting= other=" {
		t.Fatalf("a session without overrides runs in the workspace root with no variables: %q", got)
	}
	meta := c.sessionMeta(3)
	if meta["cwd"] != "." || meta["overrides"] != false || meta["allowed"] != false {
		t.Fatalf("tools/list _meta: %v", meta)
	}
}

// TestSessionOverridesRefusals: only allow-listed names, only directories
// inside the workspace (no "..", no absolute path elsewhere, no symlink
// out, no file), only the documented members.
func TestSessionOverridesRefusals(t *testing.T) {
	ws, dir := overrideFixture(t)
	policy := overrides.Policy{Allow: true, Env: []string{"GREETING"}, Workspace: ws}
	for _, tc := range []struct {
		name    string
		session any
		want    string
	}{
		{"env not allowed", map[string]any{"env": map[string]string{"GREETING": "hi", "LD_PRELOAD": "/x.so"}}, `"LD_PRELOAD" is not a variable sessions may set (allowed: GREETING`},
		{"dotdot", map[string]any{"cwd": "../"}, "is outside the workspace"},
		{"absolute elsewhere", map[string]any{"cwd": "/etc"}, "is outside the workspace"},
		{"symlink out", map[string]any{"cwd": "out"}, "is outside the workspace"},
		{"missing", map[string]any{"cwd": "nope"}, "is not a directory in the workspace"},
		{"file", map[string]any{"cwd": "file.txt"}, "is not a directory in the workspace"},
		{"unknown member", map[string]any{"cwd": "sub", "shell": "zsh"}, `must be an object with "cwd"`},
		{"env not strings", map[string]any{"env": map[string]any{"GREETING": 1}}, `must be an object with "cwd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Options{Session: SessionOptions{Overrides: policy}}, showTool(t, dir, false))
			m := c.initializeSession(0, tc.session, nil)
			if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams || !strings.Contains(m.Error.Message, tc.want) {
				t.Fatalf("want -32602 with %q, got %s", tc.want, m.raw)
			}
			if strings.Contains(m.Error.Message, dir) {
				t.Fatalf("the refusal leaks the workspace's host path: %s", m.Error.Message)
			}
		})
	}
}

// TestSessionOverridesReachTheCommandPromptAndAudit: an allowed session's
// cwd and env reach the real program, tools/list's _meta shows them (the
// value masked), the approval prompt names them, the audit record has the
// cwd and the variable's name but never its value, and another session on
// the same server sees none of it.
func TestSessionOverridesReachTheCommandPromptAndAudit(t *testing.T) {
	ws, dir := overrideFixture(t)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	alog, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer alog.Close()
	reg, err := tools.NewRegistry(showTool(t, dir, false), showTool(t, dir, true))
	if err != nil {
		t.Fatal(err)
	}
	host := NewHost(Options{Audit: alog, Logger: testLogger(t), Session: SessionOptions{Registry: reg,
		Overrides: overrides.Policy{Allow: true, Env: []string{"GREETING", "OTHER"}, Workspace: ws}}})
	a := attachClient(t, host)
	b := attachClient(t, host)

	const secret = "s3cret-greeting"
	if m := a.initializeSession(0, map[string]any{"cwd": "sub/deeper", "env": map[string]string{"GREETING": secret}}, elicitCaps); m.Error != nil {
		t.Fatalf("initialize with overrides: %s", m.raw)
	}
	if m := b.initializeSession(0, nil, nil); m.Error != nil {
		t.Fatalf("second session: %s", m.raw)
	}
	if got := inWorkspace(a.callText(1, "show"), dir); got != "cwd=/sub/deeper greeting="+secret+" other=" {
		t.Fatalf("the command did not run with the session's cwd and env: %q", got)
	}
	if got := inWorkspace(b.callText(1, "show"), dir); got != "cwd= greeting= other=" {
		t.Fatalf("another session sees the first one's overrides: %q", got)
	}
	meta := a.sessionMeta(2)
	if meta["cwd"] != "sub/deeper" || meta["overrides"] != true || meta["allowed"] != true {
		t.Fatalf("tools/list _meta: %v", meta)
	}
	if env, _ := meta["env"].(map[string]any); env["GREETING"] != "[redacted]" {
		t.Fatalf("tools/list _meta env must show the name with a masked value: %v", meta)
	}
	if raw, _ := json.Marshal(meta); strings.Contains(string(raw), secret) {
		t.Fatalf("tools/list _meta shows the value: %s", raw)
	}
	if bm := b.sessionMeta(2); bm["cwd"] != "." || bm["overrides"] != false || bm["env"] != nil {
		t.Fatalf("second session's tools/list _meta: %v", bm)
	}

	a.request(3, "tools/call", map[string]any{"name": "gated"})
	em, p := a.expectElicitation()
	if !strings.Contains(p.Message, "Set by this session: working directory sub/deeper, environment GREETING") ||
		strings.Contains(p.Message, secret) {
		t.Fatalf("the prompt must name the session's cwd and variables, never the value:\n%s", p.Message)
	}
	a.answer(em, `{"action":"accept","content":{"decision":"once"}}`)
	if r := a.toolResult(a.recv()); r.IsError || !strings.Contains(inWorkspace(errorText(r), dir), "cwd=/sub/deeper ") {
		t.Fatalf("approved call: %+v", r)
	}

	for _, c := range []*client{a, b} {
		c.closeInput()
		<-c.done
	}
	if !host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) {
		t.Fatalf("the audit log holds the variable's value:\n%s", data)
	}
	var withSession, without int
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		var r audit.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		switch {
		case r.SessionCwd == "sub/deeper" && len(r.SessionEnv) == 1 && r.SessionEnv[0] == "GREETING" && r.Cwd == "sub/deeper":
			withSession++
		case r.SessionCwd == "" && r.SessionEnv == nil && r.Cwd == ".":
			without++
		default:
			t.Errorf("unexpected record: %s", sc.Text())
		}
	}
	if withSession != 2 || without != 1 {
		t.Fatalf("want 2 records with the session's overrides and 1 without, got %d and %d:\n%s", withSession, without, data)
	}
}
