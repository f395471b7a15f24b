package actors

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"troupe/audit"
)

// TestAuditBatchesABurst sends a burst of calls at once: the auditor
// group-commits them, and every call still has its record, chained in the
// order the calls finished.
func TestAuditBatchesABurst(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, audit.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	c := newClient(t, Options{Audit: log, Session: SessionOptions{MaxInFlight: 1000}}, echoTool())
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
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := audit.Verify(f); err != nil || n != calls {
		t.Fatalf("verify: %d records, %v; want %d", n, err, calls)
	}
}
