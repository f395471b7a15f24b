package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAuditLogRotatesAcrossProcesses: two troupe servers append to one
// audit log with audit.max_bytes at its least (64 KiB). The log rotates
// under its lock while both write, each server follows the new file, and
// "troupe audit verify" finds one intact chain through every record across
// the rotated files. A sandboxed run cannot read a rotated file, as it
// cannot read the log itself.
func TestAuditLogRotatesAcrossProcesses(t *testing.T) {
	fx := newFixture(t)
	log := t.TempDir() + "/audit.jsonl"
	args := []string{"-c", fmt.Sprintf("audit.path=%q", log), "-c", "audit.max_bytes=65536", "-c", "audit.max_files=1000",
		"-c", "codex.enabled=false"}
	servers := []*stdioServer{startServer(t, fx.dir, args...), startServer(t, fx.dir, args...)}
	servers[0].initializeWithElicitation()
	servers[1].initialize("2025-06-18")
	// About 550 bytes a record: 2 × 100 calls fill more than one file.
	const each = 100
	for round := range 4 {
		for _, s := range servers {
			for i := range each / 4 {
				s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"repo.listDir","arguments":{"path":"."}}}`,
					round*each+i+1))
			}
		}
		for _, s := range servers {
			for range each / 4 {
				if m := s.recv(); m["error"] != nil {
					t.Fatalf("listDir: %v", m)
				}
			}
		}
	}
	rotated := log + ".1"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(rotated); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the log was not rotated: %v", err)
		}
	}
	s := servers[0]
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":1000,"method":"tools/call","params":{"name":"shell.exec","arguments":{"command":["sh","-c",`+
		`"cat %s %s; echo done"]}}}`, rotated, log))
	s.approveNext()
	m := s.recv()
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), "done") {
		t.Fatalf("the program did not run: %s", b)
	}
	if strings.Contains(string(b), "repo.listDir") {
		t.Fatalf("a sandboxed run read the audit log: %s", b)
	}
	for _, s := range servers {
		s.stdin.Close()
		s.exited <- <-s.exited // wait for the exit (every record written), and leave it for the cleanup
	}
	out, err := exec.Command(troupeBinary(t), "audit", "verify", log).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("%s: %d records in ", log, 2*each+1)) ||
		!strings.Contains(string(out), "chain intact") || strings.Contains(string(out), "note") {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
