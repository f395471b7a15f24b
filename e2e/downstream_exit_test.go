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
