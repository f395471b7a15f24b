package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// codexBinary returns the pinned Codex CLI that scripts/test installs in
// e2e/codex; without it the test skips locally and fails in CI.
func codexBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(moduleRoot, "e2e", "codex", "node_modules", ".bin", "codex")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: scripts/test should have installed it", bin)
		}
		t.Skip("the Codex CLI is not installed: run scripts/test")
	}
	return bin
}

// runCodex runs `codex exec --json` in workspace with a config.toml holding
// the scripted model as its provider plus mcpServers (a TOML fragment), and
// returns the JSON events Codex printed. env ("NAME=value") is added to
// Codex's otherwise minimal environment.
func runCodex(t *testing.T, model *scriptedModel, workspace, mcpServers, prompt string, env ...string) []map[string]any {
	t.Helper()
	home := t.TempDir()
	cfg := fmt.Sprintf(`model = "scripted"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"

%s`, model.baseURL(), mcpServers)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, codexBinary(t), "exec", "--skip-git-repo-check", "--json", prompt)
	cmd.Dir = workspace
	// A small, explicit environment: no API keys, and no RUST_BACKTRACE
	// (Codex would append backtraces to the text the model sees).
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "CODEX_HOME=" + home, "LANG=C.UTF-8"}, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("codex exec: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	var events []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev map[string]any
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			events = append(events, ev)
		}
	}
	return events
}

// TestCodexListsAndCallsToolsOverStdio configures Codex exactly as README
// says, lets the scripted model call each of troupe's tools through Codex,
// and checks what Codex hands back to the model. The tools are read-only,
// so Codex's default exec policy runs them without asking.
func TestCodexListsAndCallsToolsOverStdio(t *testing.T) {
	fx := newFixture(t)
	servers := fmt.Sprintf("[mcp_servers.troupe]\ncommand = %q\nargs = [\"serve\", \"--workspace\", %q]\nenv = { XDG_STATE_HOME = %q }\n",
		troupeBinary(t), fx.dir, stateHome)
	codexCallsEachTool(t, fx, servers)
}

// TestCodexListsAndCallsToolsOverHTTP is the stdio test with Codex as a
// streamable HTTP client of `troupe serve --http`: without authentication,
// and with the token Codex reads from bearer_token_env_var.
func TestCodexListsAndCallsToolsOverHTTP(t *testing.T) {
	codexBinary(t) // skip before building and starting servers
	forEachAuth(t, func(t *testing.T, fx fixture, srv *httpServer, token string) {
		servers := fmt.Sprintf("[mcp_servers.troupe]\nurl = %q\n", srv.url)
		var env []string
		if token != "" {
			servers += fmt.Sprintf("bearer_token_env_var = %q\n", tokenEnv)
			env = append(env, tokenEnv+"="+token)
		}
		codexCallsEachTool(t, fx, servers, env...)

		// Codex ends its session with DELETE on exit; the session must
		// be over while the server still runs, and not by idling out.
		if !srv.waitLog("http session deleted by the client", 5*time.Second) || !srv.waitLog("http session ended", 5*time.Second) {
			t.Errorf("Codex's DELETE did not end its session while troupe ran")
		}
		log := srv.log.String()
		if strings.Contains(log, "http session expired") {
			t.Errorf("a session expired instead of being ended by Codex")
		}
		if strings.Contains(log, "status=401") {
			t.Errorf("troupe refused some of Codex's requests as unauthenticated")
		}
	})
}

// codexCallsEachTool runs Codex with mcpServers (a TOML fragment naming
// troupe "troupe") and a scripted model that calls each of troupe's tools
// once, then checks what Codex offered the model and handed back to it.
func codexCallsEachTool(t *testing.T, fx fixture, mcpServers string, env ...string) {
	t.Helper()
	calls := []struct {
		id, tool string
		args     any
		want     string
	}{
		{"call_list", "repo_listDir", map[string]any{"path": "src"}, `main.go`},
		{"call_read", "repo_readFile", map[string]any{"path": "README.md"}, "A workspace for troupe"},
		{"call_grep", "repo_ripgrep", map[string]any{"query": fx.needle}, fx.needleText},
	}
	waits := 0
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		if _, ok := req.namespace("mcp__troupe"); !ok {
			// Codex does not wait for MCP servers before its first model
			// request; keep the turn going until troupe's tools show up.
			waits++
			return functionCall(fmt.Sprintf("call_wait_%d", waits), "", "wait_for_tools", map[string]any{})
		}
		done := req.outputs()
		for _, c := range calls {
			if _, ok := done[c.id]; !ok {
				return functionCall(c.id, "mcp__troupe", c.tool, c.args)
			}
		}
		return message("all tools called")
	})
	events := runCodex(t, model, fx.dir, mcpServers, "use troupe's tools", env...)

	model.mu.Lock()
	defer model.mu.Unlock()
	var offered []string
	for _, req := range model.requests {
		if names, ok := req.namespace("mcp__troupe"); ok {
			offered = names
			break
		}
	}
	if want := []string{"docs_fetch", "fs_writeFile", "repo_listDir", "repo_readFile", "repo_ripgrep", "shell_exec"}; !slices.Equal(offered, want) {
		t.Fatalf("Codex offered %v in mcp__troupe, want %v", offered, want)
	}
	final := model.requests[len(model.requests)-1].outputs()
	for _, c := range calls {
		out, ok := final[c.id]
		if !ok {
			t.Fatalf("no function_call_output for %s", c.tool)
		}
		if !strings.Contains(out, c.want) || strings.Contains(out, "approval") {
			t.Fatalf("%s: Codex returned %s, want it to contain %q", c.tool, out, c.want)
		}
	}
	completed := 0
	for _, ev := range events {
		if item, ok := ev["item"].(map[string]any); ok && item["type"] == "mcp_tool_call" && item["status"] == "completed" {
			completed++
		}
	}
	if completed != len(calls) {
		t.Fatalf("Codex reported %d completed mcp_tool_call items, want %d: %v", completed, len(calls), events)
	}
}
