package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lineServer is troupe serving stdio, driven line by line.
type lineServer struct {
	t     *testing.T
	in    io.WriteCloser
	lines chan string
	cmd   *exec.Cmd
	log   *lockedWriter
	once  sync.Once
}

func startLineServer(t *testing.T, workspace string, args ...string) *lineServer {
	t.Helper()
	cmd := exec.Command(troupeBinary(t), append([]string{"serve", "--workspace", workspace}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME="+stateHome)
	s := &lineServer{t: t, cmd: cmd, lines: make(chan string, 64), log: &lockedWriter{b: &strings.Builder{}}}
	cmd.Stderr = s.log
	var err error
	if s.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 8<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("server log:\n%s", s.log)
		}
	})
	return s
}

// stop closes troupe's stdin and waits for it to exit (killing it if it
// does not).
func (s *lineServer) stop() {
	s.once.Do(func() {
		s.in.Close()
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
			s.t.Errorf("troupe did not exit after its stdin closed")
		}
	})
}

// call sends a request and returns its response, skipping notifications
// and the server's own requests (callAnswering answers those).
func (s *lineServer) call(id int, method string, params any) map[string]any {
	s.t.Helper()
	return s.callAnswering(id, method, params, nil)
}

func (s *lineServer) initialize(client string, meta map[string]any) map[string]any {
	s.t.Helper()
	params := map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": client, "version": "1"}}
	if meta != nil {
		params["_meta"] = meta
	}
	m := s.call(0, "initialize", params)
	if m["error"] == nil {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
		_, _ = s.in.Write(append(b, '\n'))
	}
	return m
}

// TestInstructionsFollowTheConfig: with shell.exec turned off and
// repo.ripgrep denied, initialize's instructions name neither, and Codex
// is told the names it shows (repo_readFile).
func TestInstructionsFollowTheConfig(t *testing.T) {
	ws := t.TempDir()
	for _, tc := range []struct{ client, want, not string }{
		{"codex-mcp-client", "repo_readFile", "repo.readFile"},
		{"other-client", "repo.readFile", "repo_readFile"},
	} {
		s := startLineServer(t, ws, "-c", "shell.enabled=false", "-c", `tools.deny=["repo.ripgrep"]`,
			"-c", "codex.enabled=false", "-c", `server.instructions="Ask before large reads."`)
		m := s.initialize(tc.client, nil)
		res, _ := m["result"].(map[string]any)
		text, _ := res["instructions"].(string)
		if !strings.Contains(text, tc.want) || strings.Contains(text, tc.not) {
			t.Errorf("%s: instructions must name %s, not %s:\n%s", tc.client, tc.want, tc.not, text)
		}
		for _, gone := range []string{"shell", "ripgrep"} {
			if strings.Contains(text, gone) {
				t.Errorf("%s: instructions mention %q, which the session does not see:\n%s", tc.client, gone, text)
			}
		}
		if !strings.HasSuffix(text, "\n\nAsk before large reads.") {
			t.Errorf("%s: the configured text must follow the generated part:\n%s", tc.client, text)
		}
	}
}

// TestSessionOverridesThroughTheConfig: [sessions] turns session overrides
// on for the listed variables; a command tool then runs in the session's
// directory with its variable, and the audit record names both.
func TestSessionOverridesThroughTheConfig(t *testing.T) {
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(`
[sessions]
allow_overrides = true
allowed_env = ["GREETING"]

[audit]
path = "`+auditPath+`"

[mcp.show]
command = "sh"
args = ["-c", "echo \"cwd=$(pwd -P) greeting=$GREETING\""]
description = "Shows where it runs."
sandbox_profile = "none"
requires_approval = false
`), 0o600); err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"dev.troupe/session": map[string]any{"cwd": "sub", "env": map[string]string{"GREETING": "hello-e2e"}}}

	off := startLineServer(t, ws, "-c", "codex.enabled=false")
	if m := off.initialize("c", meta); m["error"] == nil || !strings.Contains(jsonText(m["error"]), "allow_overrides") {
		t.Fatalf("without [sessions] allow_overrides the request must be refused, got %v", m)
	}

	s := startLineServer(t, ws, "--config", cfg, "-c", "codex.enabled=false")
	if m := s.initialize("c", meta); m["error"] != nil {
		t.Fatalf("initialize: %v", m)
	}
	m := s.call(1, "tools/call", map[string]any{"name": "show", "arguments": map[string]any{}})
	if got := strings.ReplaceAll(jsonText(m["result"]), ws, ""); !strings.Contains(got, "cwd=/sub greeting=hello-e2e") {
		t.Fatalf("the command tool did not run with the session's cwd and env: %s", got)
	}
	list := s.call(2, "tools/list", map[string]any{})
	if got := jsonText(list["result"]); !strings.Contains(got, `"dev.troupe/session":{"allowed":true,"allowed_env":["GREETING"],"cwd":"sub","env":{"GREETING":"[redacted]"},"overrides":true}`) {
		t.Fatalf("tools/list _meta: %s", got)
	}
	s.stop() // the audit log is written when troupe exits at the latest
	data, err := os.ReadFile(auditPath)
	if err != nil || !strings.Contains(string(data), `"session_cwd":"sub","session_env":["GREETING"]`) {
		t.Fatalf("no audit record with the session's overrides (%v): %s", err, data)
	}
	if strings.Contains(string(data), "hello-e2e") {
		t.Fatalf("the audit log holds the variable's value: %s", data)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
