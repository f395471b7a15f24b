package mcphttp

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"troupe/actors"
	"troupe/overrides"
	"troupe/tools"
	"troupe/tools/command"
	"troupe/workspace"
)

// TestSessionOverridesStayInTheirHTTPSession: an HTTP session that sets
// its working directory and a variable in initialize runs its command
// tool there and with it; a second HTTP session on the same server runs
// in the workspace root without it.
func TestSessionOverridesStayInTheirHTTPSession(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	show, err := command.New(command.Definition{Name: "show", Description: "Shows where it runs.", Command: "sh",
		Args: []string{"-c", `echo "cwd=$(pwd -P)" "greeting=$GREETING"`}, SandboxProfile: "none"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	r := newRig(t, rigConfig{tools: []tools.Tool{show}, session: actors.SessionOptions{
		Overrides: overrides.Policy{Allow: true, Env: []string{"GREETING"}, Workspace: ws}}})

	resp, body := r.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"a","version":"1"},`+
		`"_meta":{"dev.troupe/session":{"cwd":"sub","env":{"GREETING":"from-a"}}}}}`)
	if resp.StatusCode != http.StatusOK || decode(t, body).Error != nil {
		t.Fatalf("initialize with overrides: %d %s", resp.StatusCode, body)
	}
	a := resp.Header.Get("Mcp-Session-Id")
	r.post(a, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	b := r.initialize("2025-06-18")

	run := func(session string) string {
		_, body := r.post(session, callBody(1, "show", `{}`, nil))
		return strings.TrimSpace(strings.ReplaceAll(toolText(t, decode(t, body)), dir, ""))
	}
	if got := run(a); got != "cwd=/sub greeting=from-a" {
		t.Fatalf("session a: %q", got)
	}
	if got := run(b); got != "cwd= greeting=" {
		t.Fatalf("session b sees session a's overrides: %q", got)
	}

	// Refused when the variable is not on the list: a clear -32602.
	resp, body = r.post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"c","version":"1"},"_meta":{"dev.troupe/session":{"env":{"PATH":"/evil"}}}}}`)
	if m := decode(t, body); m.Error == nil || m.Error.Code != -32602 || !strings.Contains(m.Error.Message, `"PATH" is not a variable sessions may set`) {
		t.Fatalf("want a refusal of PATH, got %d %s", resp.StatusCode, body)
	}
}
