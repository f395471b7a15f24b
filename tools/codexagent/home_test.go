package codexagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"troupe/tools"
)

// TestClientConfigIsAnAllowList: keys that choose how the model works
// pass; keys that start programs, widen the sandbox, trust a project,
// name files or redirect credentials are refused, as dotted keys and as
// tables, and the error names them.
func TestClientConfigIsAnAllowList(t *testing.T) {
	ok := []map[string]any{
		nil,
		{"model": "o3", "model_reasoning_effort": "high", "approval_policy": "never"},
		{"tools": map[string]any{"web_search": true}},
		{"developer_instructions": "be brief", "compact_prompt": "sum up"},
	}
	for _, cfg := range ok {
		if err := checkClientConfig("t", cfg); err != nil {
			t.Errorf("%v refused: %v", cfg, err)
		}
	}
	bad := map[string]map[string]any{
		"mcp_servers.p.command":                  {"mcp_servers.p.command": "/bin/sh"},
		"mcp_servers.p.args":                     {"mcp_servers": map[string]any{"p": map[string]any{"args": []any{"-c", "id"}}}},
		"notify":                                 {"notify": []any{"/bin/sh"}},
		"projects./w.trust_level":                {"projects": map[string]any{"/w": map[string]any{"trust_level": "trusted"}}},
		"sandbox_mode":                           {"sandbox_mode": "danger-full-access"},
		"sandbox_workspace_write.network_access": {"sandbox_workspace_write.network_access": true},
		"model_providers.x.base_url":             {"model_providers.x.base_url": "http://evil"},
		"model_instructions_file":                {"model_instructions_file": "/etc/shadow"},
		"shell_environment_policy.inherit":       {"shell_environment_policy.inherit": "all"},
		"features.x":                             {"features.x": true},
		"zsh_path":                               {"zsh_path": "/tmp/x"},
		"profile":                                {"profile": "p"},
	}
	for key, cfg := range bad {
		err := checkClientConfig("newConversation: config", cfg)
		te, isTool := tools.AsError(err)
		if !isTool || te.Kind != tools.KindPermissionDenied || !strings.Contains(te.Message, `"`+key+`"`) {
			t.Errorf("%s: %v", key, err)
		}
	}
}

// TestHomeConfigNeverTrustsTheWorkspace: a home's config.toml is the
// operator's with every project trust replaced by the workspace marked
// untrusted; the operator's credentials are copied, and forget removes
// them with the session.
func TestHomeConfigNeverTrustsTheWorkspace(t *testing.T) {
	op, ws, root := t.TempDir(), t.TempDir(), t.TempDir()
	cfg := "model = \"m\"\n[projects.\"" + ws + "\"]\ntrust_level = \"trusted\"\n[projects.\"/\"]\ntrust_level = \"trusted\"\n[mcp_servers.op]\ncommand = \"x\"\n"
	if err := os.WriteFile(filepath.Join(op, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(op, authFile), []byte(`{"OPENAI_API_KEY":"k"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &homes{root: root, operator: op, workspace: ws}
	home, err := h.newSession()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(home, "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model      string                       `toml:"model"`
		Projects   map[string]map[string]string `toml:"projects"`
		McpServers map[string]any               `toml:"mcp_servers"`
	}
	if err := toml.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Model != "m" || got.McpServers["op"] == nil || len(got.Projects) != 1 || got.Projects[ws]["trust_level"] != "untrusted" {
		t.Fatalf("the home's config.toml:\n%s", b)
	}
	if fi, err := os.Stat(filepath.Join(home, authFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials not copied (0600): %v %v", fi, err)
	}
	h.forget(home)
	if _, err := os.Stat(home); !os.IsNotExist(err) {
		t.Fatalf("a home with no conversations outlives its session: %v", err)
	}
}

// TestAdoptMovesAnEndedSessionsRollout: a rollout in another home moves
// into the resuming session's, at the same date path; rolloutHome knows
// only troupe's homes.
func TestAdoptMovesAnEndedSessionsRollout(t *testing.T) {
	root := t.TempDir()
	h := &homes{root: root, workspace: t.TempDir()}
	a, _ := h.newSession()
	b, _ := h.newSession()
	const id = "01a21cb9-a29e-7280-a6ef-8d8953f4da81"
	from := filepath.Join(a, "sessions", "2026", "11", "27", "rollout-2026-11-27T11-17-37-"+id+".jsonl")
	if err := os.MkdirAll(filepath.Dir(from), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(from, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := h.findRollout(id); got != from {
		t.Fatalf("findRollout = %q", got)
	}
	to, err := h.adopt(b, from)
	if err != nil || to != filepath.Join(b, "sessions", "2026", "11", "27", filepath.Base(from)) {
		t.Fatalf("adopt = %q, %v", to, err)
	}
	if _, err := os.Stat(to); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/passwd", filepath.Join(root, "x"), filepath.Join(root, "sessions", "x")} {
		if _, ok := h.rolloutHome(p); ok {
			t.Errorf("rolloutHome(%s) accepted", p)
		}
	}
}

// TestToolsHomeKeepsRefreshedCredentials: the tools' home is filled again
// before every call; a token Codex refreshed there (newer than the
// operator's) is kept, and a new login of the operator's (newer again)
// replaces it.
func TestToolsHomeKeepsRefreshedCredentials(t *testing.T) {
	op := t.TempDir()
	h := &homes{root: t.TempDir(), operator: op, workspace: t.TempDir()}
	write := func(path, s string, at time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, at, at); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	write(filepath.Join(op, authFile), "operator-1", now.Add(-time.Hour))
	home, err := h.tools()
	if err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(home, authFile), "refreshed", now.Add(-time.Minute))
	if _, err := h.tools(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, authFile)); string(b) != "refreshed" {
		t.Fatalf("a refreshed token was put back to the operator's: %q", b)
	}
	write(filepath.Join(op, authFile), "operator-2", now)
	if _, err := h.tools(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(home, authFile)); string(b) != "operator-2" {
		t.Fatalf("the operator's new login did not reach the home: %q", b)
	}
}
