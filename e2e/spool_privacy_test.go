package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunsCannotReadSpooledOutput is the cross-session read of issue 13
// through troupe itself: one call's output is spooled (troupe keeps it as
// a resource), and a later confined run searches troupe's temp area for
// it, as the attack read another session's spooled output there. It must
// find nothing: the spool lives in troupe's temp root, which confined runs
// never see.
func TestRunsCannotReadSpooledOutput(t *testing.T) {
	fx := newFixture(t)
	marker := fmt.Sprintf("SPOOLED-%d", rand.IntN(1e9))
	half := len(marker) / 2
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	conf := fmt.Sprintf(`[mcp.produce]
command = "/bin/echo"
args = [%q]
sandbox_profile = "none"
requires_approval = false

[mcp.snoop]
command = "/bin/sh"
args = ["-c", "grep -rs \"$0$1\" %s/troupe-* ; echo searched", %q, %q]
sandbox_profile = "default"
requires_approval = false
`, marker, os.TempDir(), marker[:half], marker[half:])
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fx.dir, "--config", cfg)
	s.initialize("2025-06-18")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"produce","arguments":{}}}`)
	if text := resultText(t, s.recv()); !strings.Contains(text, marker) {
		t.Fatalf("produce: %s", text)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"snoop","arguments":{}}}`)
	text := resultText(t, s.recv())
	if !strings.Contains(text, "searched") {
		t.Fatalf("snoop did not run: %s", text)
	}
	if strings.Contains(text, marker) {
		t.Fatalf("a confined run read spooled output: %s", text)
	}
}
