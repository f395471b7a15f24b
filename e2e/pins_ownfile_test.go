package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The pins file is one of troupe's own: a sandboxed run can neither read
// it (which versions are trusted) nor write it (trusting its own), nor its
// lock; and a pins.path inside the workspace is refused at start, naming
// it and the fix.
func TestPinsFileIsTroupesOwn(t *testing.T) {
	fx := newFixture(t)
	tmp := t.TempDir()
	dsConfig := filepath.Join(tmp, "ds.toml")
	pinsOriginal.write(t, dsConfig)
	pinsFile, auditFile := filepath.Join(tmp, "state", "pins.json"), filepath.Join(tmp, "state", "audit.jsonl")
	front := filepath.Join(tmp, "front.toml")
	pinsFront(t, front, fx.dir, dsConfig, pinsFile, auditFile, "hold")

	s := startServer(t, fx.dir, "--config", front, "-c", "codex.enabled=false")
	c := newPinsClient(t, s)
	eventually(t, "ds.probe pinned", func() (bool, string) {
		b, err := os.ReadFile(pinsFile)
		return err == nil && strings.Contains(string(b), `"probe"`), string(b)
	})
	c.ask = func(map[string]any) map[string]any {
		return map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}
	}
	script := fmt.Sprintf("cat %[1]s %[1]s.lock; echo '{}' > %[1]s; echo '{}' > %[1]s.lock; echo done", pinsFile)
	m := c.await(t, c.request(t, "tools/call", map[string]any{"name": "shell.exec",
		"arguments": map[string]any{"command": []string{"sh", "-c", script}}}))
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), "done") {
		t.Fatalf("the program did not run: %s", b)
	}
	if strings.Contains(string(b), "first use") || strings.Contains(string(b), `\"hash\"`) {
		t.Fatalf("a sandboxed run read the pins file: %s", b)
	}
	if got, err := os.ReadFile(pinsFile); err != nil || !strings.Contains(string(got), `"probe"`) {
		t.Fatalf("a sandboxed run rewrote the pins file: %q %v", got, err)
	}
	stopPeer(t, s)

	// pins.path inside the workspace: refused, like the audit log.
	inside := filepath.Join(fx.dir, "pins.json")
	cmd := exec.Command(troupeBinary(t), "serve", "--workspace", fx.dir, "--config", front, "-c", fmt.Sprintf("pins.path=%q", inside))
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "pins.path") ||
		!strings.Contains(string(out), inside) || !strings.Contains(string(out), "set pins.path outside the workspace") {
		t.Fatalf("troupe with pins.path in the workspace: %v\n%s", err, out)
	}
}
