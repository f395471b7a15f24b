package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"troupe/sandbox"
)

// TestMain lets the test binary play troupe's sandbox helper, as main
// does: sandbox.New probes by re-executing the running binary. The
// troupes the tests run in-process keep their state (the pins of
// downstream servers' tools, audit logs) in a directory of their own,
// never in the state directory of whoever runs the tests.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfAsked() // the sandbox re-executes this binary as its helper
	os.Exit(runTests(m))
}

// runTests is TestMain's body, apart so its deferred cleanup runs before
// os.Exit.
func runTests(m *testing.M) int {
	state, err := os.MkdirTemp("", "troupe-cmd-state-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "cmd/troupe tests: %v\n", err)
		return 1
	}
	defer os.RemoveAll(state)
	if err := os.Setenv("XDG_STATE_HOME", state); err != nil {
		fmt.Fprintf(os.Stderr, "cmd/troupe tests: %v\n", err)
		return 1
	}
	return m.Run()
}

// TestCommandLineErrors covers the paths that end before serving: each
// exits non-zero with a message on stderr and writes nothing to stdout.
func TestCommandLineErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args    []string
		code    int
		mention string
	}{
		{nil, 2, "Usage"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"serve", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"serve", "--bogus"}, 2, "bogus"},
		{[]string{"serve", "-c", "limits.nope=1"}, 2, "nope"},
		{[]string{"serve", "--log-format", "xml"}, 2, "xml"},
		{[]string{"serve", "--log-level", "chatty"}, 2, "chatty"},
		{[]string{"serve", "--workspace", filepath.Join(dir, "missing")}, 2, "cannot open the workspace"},
		// Refused before binding: nothing listens beyond loopback, even briefly.
		{[]string{"serve", "--workspace", dir, "--http", "0.0.0.0:0"}, 2, "refusing to serve 0.0.0.0:0 without authentication"},
		{[]string{"serve", "--workspace", dir, "--http", ":0"}, 2, "refusing to serve"},
		{[]string{"serve", "--workspace", dir, "--http", "no-port"}, 2, "want host:port"},
		{[]string{"serve", "--http", "127.0.0.1:0", "--bearer-token-env", "TROUPE_TEST_UNSET_VAR"}, 2, "not set"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
			if got := run(c.args, strings.NewReader(""), stdout, stderr); got != c.code {
				t.Fatalf("exit %d, want %d", got, c.code)
			}
			out, _ := os.ReadFile(stdout.Name())
			errText, _ := os.ReadFile(stderr.Name())
			if !strings.Contains(string(errText), c.mention) {
				t.Fatalf("stderr %q does not mention %q", errText, c.mention)
			}
			if len(out) != 0 && c.args != nil {
				t.Fatalf("stdout must stay empty, got %q", out)
			}
		})
	}
}

func tempFile(t *testing.T, dir, prefix string) *os.File {
	f, err := os.CreateTemp(dir, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte("[http.auth]\nbearer_token = \"${CHECK_TOKEN}\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHECK_TOKEN", "very-secret-value")
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"config", "check", "--config", file, "-c", "limits.page_size=9"}, strings.NewReader(""), stdout, stderr); code != 0 {
		errText, _ := os.ReadFile(stderr.Name())
		t.Fatalf("exit %d: %s", code, errText)
	}
	out, _ := os.ReadFile(stdout.Name())
	if strings.Contains(string(out), "very-secret-value") || !strings.Contains(string(out), "${CHECK_TOKEN}") ||
		!strings.Contains(string(out), "page_size = 9") {
		t.Fatalf("config check output:\n%s", out)
	}
	stdout, stderr = tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"config", "check", "-c", "limits.page_size=0"}, strings.NewReader(""), stdout, stderr); code != 2 {
		t.Fatalf("invalid config: exit %d", code)
	}
	errText, _ := os.ReadFile(stderr.Name())
	if !strings.Contains(string(errText), "limits.page_size") {
		t.Fatalf("stderr: %s", errText)
	}
}

// runOK runs the CLI and returns stdout, failing on a non-zero exit.
func runOK(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run(args, strings.NewReader(""), stdout, stderr); code != 0 {
		errText, _ := os.ReadFile(stderr.Name())
		t.Fatalf("troupe %v: exit %d: %s", args, code, errText)
	}
	out, _ := os.ReadFile(stdout.Name())
	return string(out)
}

func TestToolsCommand(t *testing.T) {
	ws := t.TempDir()
	var list struct {
		Tools []struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"tools"`
	}
	out := runOK(t, "tools", "--json", "--workspace", ws, "-c", `tools.deny=["repo.listDir"]`)
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// docs.fetch, fs.writeFile, repo.readFile, repo.ripgrep, shell.exec.
	if len(list.Tools) != 5 || list.Tools[2].Name != "repo.readFile" || list.Tools[2].Meta["dev.troupe/requires_approval"] != false ||
		list.Tools[4].Name != "shell.exec" || list.Tools[4].Meta["dev.troupe/high_risk"] != true {
		t.Fatalf("tools --json: %s", out)
	}
	if text := runOK(t, "tools", "--workspace", ws); !strings.Contains(text, "mcp__troupe / repo_readFile") {
		t.Fatalf("tools: %s", text)
	}
}

func TestCodexConfigCommand(t *testing.T) {
	ws := t.TempDir()
	out := runOK(t, "codex-config", "--workspace", ws)
	if !strings.HasPrefix(out, "[mcp_servers.troupe]\ncommand = ") || !strings.Contains(out, `args = ["serve", "--workspace", "`+ws+`"]`) {
		t.Fatalf("stdio block:\n%s", out)
	}
	t.Setenv("CC_TOKEN", "x")
	out = runOK(t, "codex-config", "--http", "http://127.0.0.1:9/mcp", "-c", `http.auth.bearer_token="${CC_TOKEN}"`)
	if out != "[mcp_servers.troupe]\nurl = \"http://127.0.0.1:9/mcp\"\nbearer_token_env_var = \"CC_TOKEN\"\n" {
		t.Fatalf("http block:\n%s", out)
	}
}

func TestMcpServerSurfaceGate(t *testing.T) {
	ws := t.TempDir()
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, []byte("[mcp.hello]\ncommand = \"echo\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runOK(t, "tools", "--json", "--workspace", ws, "--config", file); !strings.Contains(out, `"name": "hello"`) {
		t.Fatalf("command tool not served with the surface on:\n%s", out)
	}
	out := runOK(t, "tools", "--json", "--workspace", ws, "--config", file, "-c", "features.enable_mcp_server_surface=false")
	if strings.Contains(out, `"name": "hello"`) || !strings.Contains(out, `"name": "repo.readFile"`) {
		t.Fatalf("with the surface off only first-party tools may be served:\n%s", out)
	}
}

func TestCodexNameWarningsAtLoad(t *testing.T) {
	dir, ws := t.TempDir(), t.TempDir()
	file := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(file, []byte("[mcp.\"git.status\"]\ncommand = \"git\"\n[mcp.git_status]\ncommand = \"git\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr := tempFile(t, dir, "out"), tempFile(t, dir, "err")
	if code := run([]string{"tools", "--config", file, "--workspace", ws}, strings.NewReader(""), stdout, stderr); code != 0 {
		t.Fatalf("exit %d", code)
	}
	errText, _ := os.ReadFile(stderr.Name())
	if want := `all become "git_status" in Codex`; !strings.Contains(string(errText), want) {
		t.Fatalf("stderr lacks %q:\n%s", want, errText)
	}
	// The "_" in git.status is no warning: troupe tools shows the name.
	if strings.Count(string(errText), "\n") != 1 {
		t.Fatalf("want the one warning, got:\n%s", errText)
	}
}
