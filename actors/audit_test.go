package actors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/audit"
	"troupe/tools"
)

// TestAuditBatchesABurst sends a burst of calls at once: the audit writer
// group-commits them, and every call still has its record, chained in the
// order the calls finished.
func TestAuditBatchesABurst(t *testing.T) {
	c, path := auditedClient(t, echoTool())
	c.initialize("2025-06-18")
	const calls = 300
	for i := range calls {
		c.request(i, "tools/call", map[string]any{"name": "echo"})
	}
	for range calls {
		c.recv()
	}
	c.closeInput()
	<-c.done
	if !c.host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	verifyAudit(t, path, calls)
}

// TestCancelledCallsAreAuditedOnce cancels calls right after sending them,
// so some are cancelled before their invoker took them and some while they
// run: each still has exactly one record.
func TestCancelledCallsAreAuditedOnce(t *testing.T) {
	c, path := auditedClient(t, blockTool(nil, nil))
	c.initialize("2025-06-18")
	const calls = 200
	for i := range calls {
		c.request(i+1, "tools/call", map[string]any{"name": "block"})
		c.notify("notifications/cancelled", map[string]any{"requestId": i + 1})
	}
	c.request(calls+1, "ping", nil)
	c.recv()
	c.closeInput()
	<-c.done
	if !c.host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	verifyAudit(t, path, calls)
}

// verifyAudit checks the log at path holds want records in an unbroken
// chain.
func verifyAudit(t *testing.T, path string, want int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := audit.Verify(f); err != nil || n != want {
		t.Fatalf("verify: %d records, %v; want %d", n, err, want)
	}
}

// auditedClient is a client of a Host serving tool with an audit log at
// the returned path (closed when the test ends).
func auditedClient(t *testing.T, tool tools.Tool) (*client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	return newClient(t, Options{Audit: log, Session: SessionOptions{MaxInFlight: 1000}}, tool), path
}

// The audit writer tells the Host's Observer of every batch it wrote
// (the metrics' troupe_audit_batch_records): all the records, no more.
func TestAuditBatchesReachTheObserver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	obs := &wiringObserver{}
	c := newClient(t, Options{Audit: log, Observer: obs, Session: SessionOptions{MaxInFlight: 100}}, echoTool())
	c.initialize("2025-06-18")
	const calls = 50
	for i := range calls {
		c.request(i, "tools/call", map[string]any{"name": "echo"})
	}
	for range calls {
		c.recv()
	}
	c.closeInput()
	<-c.done
	if !c.host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	verifyAudit(t, path, calls)
	if n := obs.flushed(); n != calls {
		t.Fatalf("the Observer heard of %d records written, want %d", n, calls)
	}
}

// A call's audit record names who called: over stdio, the local user.
// (Over HTTP the token's name: mcphttp's TestAuditNamesTheIdentity.)
func TestAuditNamesTheLocalUser(t *testing.T) {
	c, path := auditedClient(t, echoTool())
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "echo"})
	c.recv()
	c.closeInput()
	<-c.done
	if !c.host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"session":"s-`) || !strings.Contains(string(b), `"identity":"local","tool":"echo"`) {
		t.Fatalf("the record does not name the local user: %s", b)
	}
}
