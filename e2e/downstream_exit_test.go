package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A downstream server that exits says why, where the operator and the
// caller look: troupe's log, `troupe tools`, the status page's JSON and
// the error of a call to one of its tools show its exit status and the
// last lines of its stderr (secrets masked), not "connection closed".

// flakySecret is a secret-named variable's value the failing server prints
// on stderr; troupe must mask it everywhere it shows the stderr.
const flakySecret = "flaky-tok-4d1c9a7e"

// flakyTable is an [mcp_servers.flaky] table under the default profile:
// its first start runs server-everything (when first is true), every later
// one writes two lines on stderr, one with a secret, and exits with
// status 7. The marker that tells them apart lies in the workspace, the
// one place a sandboxed server may write besides its own.
func flakyTable(t *testing.T, workspace string, first bool) string {
	t.Helper()
	marker := filepath.Join(workspace, ".flaky-started")
	script := `echo "flaky: cannot read its settings: permission denied" >&2
echo "flaky: token $FLAKY_API_TOKEN rejected" >&2
exit 7`
	if first {
		command, args := everythingStdioCommand(t)
		script = fmt.Sprintf(`if [ ! -e %q ]; then : > %q; exec %q %q %q; fi
%s`, marker, marker, command, args[0], args[1], script)
	}
	quoted, _ := json.Marshal(script)
	return fmt.Sprintf(`[mcp_servers.flaky]
command = "/bin/sh"
args = ["-c", %s]
env = { FLAKY_API_TOKEN = %q }
sandbox_profile = "default"
requires_approval = false
startup_timeout_sec = 10
`, quoted, flakySecret)
}

// checkExitShown fails unless text shows the server's exit status and
// both stderr lines, the secret masked, and not the old "connection
// closed".
func checkExitShown(t *testing.T, where, text string) {
	t.Helper()
	for _, want := range []string{"the server exited with status 7",
		"flaky: cannot read its settings: permission denied", "flaky: token [redacted] rejected"} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", where, want, text)
		}
	}
	if strings.Contains(text, flakySecret) {
		t.Errorf("%s shows the secret:\n%s", where, text)
	}
	if strings.Contains(text, "connection closed") {
		t.Errorf("%s says only %q:\n%s", where, "connection closed", text)
	}
}

// `troupe tools` of a server that exits at start.
func TestToolsCommandShowsHowAServerExited(t *testing.T) {
	fx := newFixture(t)
	cfg := downstreamConfig(t, flakyTable(t, fx.dir, false))
	out, err := exec.Command(troupeBinary(t), "tools", "--workspace", fx.dir, "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("troupe tools: %v\n%s", err, out)
	}
	var line string
	for l := range strings.Lines(string(out)) {
		if strings.HasPrefix(l, "server flaky: ") {
			line = l
		}
	}
	if !strings.HasPrefix(line, "server flaky: down: ") {
		t.Fatalf("troupe tools has no line for the flaky server:\n%s", out)
	}
	checkExitShown(t, "troupe tools' line", line)
}

// A server that ran and then exits: the log's warning, /status/ and the
// call's error say how it ended.
func TestDownstreamExitShownInLogStatusAndCall(t *testing.T) {
	requireDownstream(t)
	fx := newFixture(t)
	cfg := downstreamConfig(t, flakyTable(t, fx.dir, true)+"\n[limits]\nmcp_servers_startup_wait = \"8s\"\n")
	srv := startHTTPServer(t, fx.dir, newToken(t), "--config", cfg)
	s := openSession(t, srv)
	if body := s.call(t, 2, "flaky.get-tiny-image"); strings.Contains(body, `"isError":true`) {
		t.Fatalf("the first call failed: %s", body)
	}

	// Kill the running server; its next starts exit with status 7.
	var node int
	for deadline := time.Now().Add(10 * time.Second); node == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		node = childWithArg(srv.cmd.Process.Pid, "node", "server-everything")
	}
	if node == 0 {
		t.Fatal("no node child of troupe")
	}
	if err := syscallKill(node); err != nil {
		t.Fatal(err)
	}

	snap := waitStatus(t, srv, "the flaky server's exit", func(s statusSnapshot) bool {
		for _, d := range s.Downstreams {
			if d.Name == "flaky" && strings.Contains(d.Err, "status 7") {
				return true
			}
		}
		return false
	})
	for _, d := range snap.Downstreams {
		if d.Name == "flaky" {
			checkExitShown(t, "/status/'s error of "+d.State+" flaky", d.Err)
		}
	}

	body := s.call(t, 3, "flaky.get-tiny-image")
	if !strings.Contains(body, `"isError":true`) || !strings.Contains(body, "server flaky is not connected") {
		t.Fatalf("a call to the exited server: %s", body)
	}
	checkExitShown(t, "the call's error", body)

	// The log's warning about the failed start says it on its own line.
	var warning string
	for deadline := time.Now().Add(10 * time.Second); warning == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		for l := range strings.Lines(srv.log.String()) {
			if strings.Contains(l, "downstream: cannot connect") && strings.Contains(l, "flaky") {
				warning = l
			}
		}
	}
	if warning == "" {
		t.Fatalf("no warning about the failed start in the log:\n%s", srv.log)
	}
	checkExitShown(t, "the log's warning", warning)
	_ = os.Remove(filepath.Join(fx.dir, ".flaky-started"))
}

// readmeDownstreamBlock is README's own [mcp_servers.everything] table, as
// the section "Downstream MCP servers" shows it.
func readmeDownstreamBlock(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Downstream MCP servers\n")
	_, block, ok2 := strings.Cut(section, "```toml\n")
	block, _, ok3 := strings.Cut(block, "\n\n")
	if !ok || !ok2 || !ok3 || !strings.HasPrefix(block, "[mcp_servers.everything]") {
		t.Fatalf("README's Downstream MCP servers section has no [mcp_servers.everything] block first")
	}
	return block + "\n"
}

// README's downstream example works as written under the default
// profile: npx runs server-everything (resolved offline from the
// project's pinned install, as a project that depends on it would have
// it), it connects, and its tools are listed, each saying it runs under
// the default profile.
func TestReadmeDownstreamExampleConnects(t *testing.T) {
	requireDownstream(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not installed")
	}
	block := readmeDownstreamBlock(t)
	if !strings.Contains(block, `sandbox_profile = "default"`) || !strings.Contains(block, `command = "npx"`) {
		t.Fatalf("README's block is not the npx example under the default profile:\n%s", block)
	}
	fx := newFixture(t)
	// The workspace is a project with server-everything installed, so npx
	// finds it without the registry (this machine has no network).
	if err := os.Symlink(filepath.Join(moduleRoot, "e2e", "downstream", "node_modules"), filepath.Join(fx.dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	cfg := downstreamConfig(t, block+"startup_timeout_sec = 60\n")
	path := strings.Join([]string{filepath.Join(moduleRoot, "e2e", "downstream", "node_modules", ".bin"),
		filepath.Dir(npx), filepath.Dir(nodeBinary(t)), "/usr/bin", "/bin"}, string(os.PathListSeparator))
	cmd := exec.Command(troupeBinary(t), "tools", "--json", "--workspace", fx.dir, "--config", cfg)
	cmd.Env = append(withoutVar(withoutVar(os.Environ(), "PATH"), "npm_config_cache"), "PATH="+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("troupe tools: %v\n%s", err, out)
	}
	var got struct {
		Tools []struct {
			Name string         `json:"name"`
			Meta map[string]any `json:"_meta"`
		} `json:"tools"`
		Servers []struct {
			Name, State, Error string
			Tools              int
		} `json:"servers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("troupe tools --json: %v\n%s", err, out)
	}
	if len(got.Servers) != 1 || got.Servers[0].State != "ready" || got.Servers[0].Tools == 0 {
		t.Fatalf("README's server did not connect: %+v", got.Servers)
	}
	var echo bool
	for _, tl := range got.Tools {
		if !strings.HasPrefix(tl.Name, "everything.") {
			continue
		}
		echo = echo || tl.Name == "everything.echo"
		if p := tl.Meta["dev.troupe/sandbox_profile"]; p != "default" {
			t.Errorf("%s: dev.troupe/sandbox_profile is %v, want default (the server's profile)", tl.Name, p)
		}
		if n := tl.Meta["dev.troupe/allow_network"]; n != true {
			t.Errorf("%s: dev.troupe/allow_network is %v, want true (README allows the network)", tl.Name, n)
		}
	}
	if !echo {
		t.Errorf("everything.echo is not listed: %s", out)
	}
}

// A sandboxed server writes its home and caches as npx does (~/.npm,
// else EROFS when npx installs a package): README's env_vars pass the
// operator's HOME, which the default profile leaves read-only, and troupe
// gives the server a home of its own instead. The server comes up only if
// the writes succeed.
func TestSandboxedServerHasAWritableHome(t *testing.T) {
	requireDownstream(t)
	fx := newFixture(t)
	command, args := everythingStdioCommand(t)
	script := fmt.Sprintf(`set -e
mkdir -p "$HOME/.npm/_cacache" "$npm_config_cache/_npx" "$XDG_CACHE_HOME/uv"
echo probe > "$HOME/.npm/_cacache/probe"
case "$HOME" in %q*) echo "HOME is the workspace" >&2; exit 9;; esac
exec %q %q %q`, fx.dir, command, args[0], args[1])
	cfg := downstreamConfig(t, stdioServerTable("homely", "/bin/sh", []string{"-c", script}, `sandbox_profile = "default"`))
	out, err := exec.Command(troupeBinary(t), "tools", "--workspace", fx.dir, "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("troupe tools: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "server homely: ready,") {
		t.Fatalf("the server could not write its home:\n%s", out)
	}
}
