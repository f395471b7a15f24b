package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// initializeWithElicitation initializes a session whose client can show
// approval forms.
func (s *stdioServer) initializeWithElicitation() {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{"elicitation":{}},"clientInfo":{"name":"e2e","version":"1"}}}`)
	if m := s.recv(); m["error"] != nil {
		s.t.Fatalf("initialize: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// approveNext answers the next message, which must be an approval
// request, with a trust for the session.
func (s *stdioServer) approveNext() {
	s.t.Helper()
	m := s.recv()
	if m["method"] != "elicitation/create" {
		s.t.Fatalf("want an approval request, got %v", m)
	}
	id, _ := m["id"].(float64)
	s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"action":"accept","content":{"decision":"session"}}}`, int(id)))
}

// rssKiB is a process's resident set size.
func rssKiB(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// processesWith counts processes whose command line contains marker.
func processesWith(marker string) int {
	n := 0
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(b), marker) {
			n++
		}
	}
	return n
}

// A tool printing 100 MB as fast as it can to a client that reads slowly:
// the server's memory stays bounded (the program is made to wait), the
// client gets progress, and cancelling kills the whole process tree.
func TestStreamingToASlowClientIsBounded(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir)
	s.initializeWithElicitation()
	// Every output line then goes out as a log message: a real flood.
	s.send(`{"jsonrpc":"2.0","id":"lvl","method":"logging/setLevel","params":{"level":"info"}}`)
	if m := s.recv(); m["error"] != nil {
		t.Fatalf("setLevel: %v", m)
	}
	marker := "troupe-flood-" + strconv.Itoa(os.Getpid())
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell.exec","_meta":{"progressToken":"p"},` +
		`"arguments":{"command":["bash","-c","# ` + marker + `\nhead -c 100000000 /dev/zero | tr '\\0' 'a' | fold -w 99"]}}}`)
	s.approveNext()
	pid := s.cmd.Process.Pid
	base := rssKiB(t, pid)
	peak, notes := base, 0
	for deadline := time.Now().Add(4 * time.Second); time.Now().Before(deadline); {
		m := s.recv()
		if m["id"] != nil {
			t.Fatalf("the call finished while the client was slow: %v", m)
		}
		notes++
		peak = max(peak, rssKiB(t, pid))
		time.Sleep(20 * time.Millisecond) // a slow client
	}
	t.Logf("RSS %d KiB before, %d KiB peak; %d notifications read", base, peak, notes)
	if notes < 10 {
		t.Fatalf("only %d notifications in 4 s", notes)
	}
	if grew := peak - base; grew > 64<<10 {
		t.Errorf("server RSS grew by %d MiB while streaming to a slow client", grew>>10)
	}
	if processesWith(marker) == 0 {
		t.Fatal("the program is not running (did it finish without back-pressure?)")
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	gone := false
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !gone; time.Sleep(50 * time.Millisecond) {
		gone = processesWith(marker) == 0
		// Keep reading what was queued before the cancellation.
		select {
		case <-s.lines:
		default:
		}
	}
	if !gone {
		t.Fatal("processes of the cancelled call are still running")
	}
	go func() { // read what is left, so troupe can finish writing and exit
		for range s.lines {
		}
	}()
}

// Every call leaves an audit record, and troupe audit verify checks the
// chain and notices an edit.
func TestAuditLogVerifies(t *testing.T) {
	fx := newFixture(t)
	log := filepath.Join(t.TempDir(), "audit.jsonl")
	s := startServer(t, fx.dir, "-c", fmt.Sprintf("audit.path=%q", log))
	s.initialize("2025-06-18")
	for i := range 3 {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"repo.listDir","arguments":{"path":"."}}}`, i+1))
		s.recv()
	}
	s.stdin.Close()
	s.exited <- <-s.exited // wait for the exit, and leave it for the cleanup
	verify := func() (string, error) {
		out, err := exec.Command(troupeBinary(t), "audit", "verify", log).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil || !strings.Contains(out, "3 records, chain intact") {
		t.Fatalf("verify: %v %s", err, out)
	}
	b, _ := os.ReadFile(log)
	edited := strings.Replace(string(b), `"tool":"repo.listDir"`, `"tool":"repo.readFile"`, 1)
	os.WriteFile(log, []byte(edited), 0o600)
	if out, err := verify(); err == nil || !strings.Contains(out, "line 1") {
		t.Fatalf("an edited record verified: %s", out)
	}
}

// A sandboxed program cannot read the server's secrets: not from its own
// environment (troupe passes a minimal one) nor from the server's through
// /proc (troupe is not dumpable).
func TestSandboxedProgramCannotReadServerSecrets(t *testing.T) {
	secret := "troupe-e2e-secret-" + strconv.Itoa(os.Getpid())
	t.Setenv("TROUPE_E2E_API_TOKEN", secret)
	fx := newFixture(t)
	s := startServer(t, fx.dir)
	s.initializeWithElicitation()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell.exec","arguments":{"command":["sh","-c",` +
		`"env; cat /proc/$PPID/environ; tr '\\0' '\\n' < /proc/$PPID/environ; echo done"]}}}`)
	s.approveNext()
	m := s.recv()
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), "done") {
		t.Fatalf("the program did not run: %s", b)
	}
	if strings.Contains(string(b), secret) {
		t.Fatalf("the server's secret reached the program: %s", b)
	}
}
