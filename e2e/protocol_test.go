package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stdioServer is the real troupe binary on pipes, driven line by line: the
// protocol edge cases need exact control of what goes on the wire.
type stdioServer struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *strings.Builder
	errw   *lockedWriter
	exited chan error
}

func startServer(t *testing.T, workspace string, extra ...string) *stdioServer {
	t.Helper()
	return startServerWith(t, workspace, nil, extra...)
}

// startServerWith is startServer with prep applied to the command before
// it starts (a controlling terminal, say).
func startServerWith(t *testing.T, workspace string, prep func(*exec.Cmd), extra ...string) *stdioServer {
	t.Helper()
	args := append([]string{"serve", "--workspace", workspace, "--log-level", "debug"}, extra...)
	cmd := exec.Command(troupeBinary(t), args...)
	if prep != nil {
		prep(cmd)
	}
	return startPeer(t, cmd, true)
}

// startPeer runs cmd as a line-delimited JSON-RPC peer on its stdin and
// stdout. When the test ends its stdin is closed; a peer that has not
// exited 15 s later is killed, and with mustExit that fails the test
// (troupe must end when its input does).
func startPeer(t *testing.T, cmd *exec.Cmd, mustExit bool) *stdioServer {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &stdioServer{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 256),
		stderr: &strings.Builder{}, exited: make(chan error, 1)}
	s.errw = &lockedWriter{b: s.stderr}
	cmd.Stderr = s.errw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	go func() { s.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		s.stdin.Close()
		select {
		case <-s.exited:
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			if mustExit {
				t.Errorf("%s did not exit after stdin closed", filepath.Base(cmd.Path))
			}
			<-s.exited
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", filepath.Base(cmd.Path), s.stderr.String())
		}
	})
	return s
}

func (s *stdioServer) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, line+"\n"); err != nil {
		s.t.Fatalf("write to troupe: %v", err)
	}
}

// recv returns the next stdout line, which must be one JSON value.
func (s *stdioServer) recv() map[string]any {
	s.t.Helper()
	return s.recvWithin(20 * time.Second)
}

// recvWithin is recv waiting up to d: for answers that take long under the
// race detector on a loaded machine (a guard against a hang, not a speed
// target).
func (s *stdioServer) recvWithin(d time.Duration) map[string]any {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.t.Fatal("troupe closed stdout")
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			s.t.Fatalf("stdout line is not a JSON-RPC object: %q", l)
		}
		if m["jsonrpc"] != "2.0" {
			s.t.Fatalf("stdout line without jsonrpc 2.0: %q", l)
		}
		return m
	case <-time.After(d):
		s.t.Fatal("timed out waiting for troupe")
	}
	return nil
}

func (s *stdioServer) initialize(version string) {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	if m := s.recv(); m["error"] != nil {
		s.t.Fatalf("initialize: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// errorCode returns a response's error code and its id, or fails.
func errorCode(t *testing.T, m map[string]any) (float64, any) {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("want an error response, got %v", m)
	}
	return e["code"].(float64), m["id"]
}

func TestProtocolEdgeCasesOverStdio(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir, "-c", "limits.max_line_bytes=4096")
	ping := func(id int) {
		t.Helper()
		s.send(`{"jsonrpc":"2.0","id":` + itoa(id) + `,"method":"ping"}`)
		m := s.recv()
		if m["id"] != float64(id) || m["result"] == nil {
			t.Fatalf("ping %d after a bad input: %v", id, m)
		}
	}

	// Before initialize: ping works, tools/list does not.
	ping(1)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if code, _ := errorCode(t, s.recv()); code != -32600 {
		t.Fatalf("tools/list before initialize: code %v", code)
	}
	s.initialize("2025-06-18")

	bad := []struct {
		name, line string
		code       float64
		id         any
	}{
		{"garbage", `this is not json`, -32700, nil},
		{"truncated", `{"jsonrpc":"2.0","id":5,"method":"tools/li`, -32700, nil},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":6,"method":"ping"}`, -32600, float64(6)},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600, nil},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, -32600, 1.5},
		{"negative id", `{"jsonrpc":"2.0","id":-3,"method":"ping"}`, -32600, float64(-3)},
		{"neither request nor response", `{"jsonrpc":"2.0","id":8}`, -32600, float64(8)},
		{"batch under 2025-06-18", `[{"jsonrpc":"2.0","id":9,"method":"ping"}]`, -32600, nil},
		{"oversized", `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"p":"` + strings.Repeat("x", 8000) + `"}}`, -32600, nil},
		{"second initialize", `{"jsonrpc":"2.0","id":11,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}`, -32600, float64(11)},
		{"unknown method", `{"jsonrpc":"2.0","id":12,"method":"resources/frobnicate"}`, -32601, float64(12)},
		{"bad params", `{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":42}}`, -32602, float64(13)},
		{"bad cursor", `{"jsonrpc":"2.0","id":14,"method":"tools/list","params":{"cursor":"nope"}}`, -32602, float64(14)},
		{"bad log level", `{"jsonrpc":"2.0","id":15,"method":"logging/setLevel","params":{"level":"shouty"}}`, -32602, float64(15)},
	}
	for i, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			s.t = t
			s.send(b.line)
			code, id := errorCode(t, s.recv())
			if code != b.code || id != b.id {
				t.Fatalf("got code %v id %v, want code %v id %v", code, id, b.code, b.id)
			}
			ping(100 + i)
		})
	}
	s.t = t

	// Notifications never get a response, known or not.
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/made-up","params":{}}`)
	ping(200)

	// An unknown tool and invalid arguments are tool results, not protocol errors.
	s.send(`{"jsonrpc":"2.0","id":201,"method":"tools/call","params":{"name":"repo.nope","arguments":{}}}`)
	assertToolError(t, s.recv(), "repo.nope")
	s.send(`{"jsonrpc":"2.0","id":202,"method":"tools/call","params":{"name":"repo.readFile","arguments":{"path":"README.md","maxBytes":"x"}}}`)
	assertToolError(t, s.recv(), "maxBytes")
	s.send(`{"jsonrpc":"2.0","id":203,"method":"tools/call","params":{"name":"repo.readFile","arguments":{"path":"README.md"}}}`)
	if m := s.recv(); !strings.Contains(resultText(t, m), "A workspace for troupe") {
		t.Fatalf("good call after bad ones: %v", m)
	}
}

func TestBatchesUnder20250326OverStdio(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir)
	s.initialize("2025-03-26")
	s.send(`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.readFile","arguments":{"path":"README.md"}}},{"jsonrpc":"2.0","id":null,"method":"ping"}]`)
	select {
	case l := <-s.lines:
		var arr []map[string]any
		if err := json.Unmarshal([]byte(l), &arr); err != nil || len(arr) != 3 {
			t.Fatalf("want one array with 3 responses, got %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no batch response")
	}
}

func TestPathTricksOverStdio(t *testing.T) {
	fx := newFixture(t)
	if err := os.Symlink("/etc", filepath.Join(fx.dir, "etc-link")); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fx.dir)
	s.initialize("2025-11-25")
	tricks := []string{
		"../secret.txt", "src/../../secret.txt", filepath.Join(fx.root, "secret.txt"), "/etc/passwd",
		"/proc/self/root/etc/passwd", "/proc/self/cwd/../secret.txt", "escape", "etc-link/passwd",
	}
	for i, p := range tricks {
		for _, tool := range []string{"repo.readFile", "repo.listDir"} {
			args, _ := json.Marshal(map[string]any{"path": p})
			s.send(`{"jsonrpc":"2.0","id":` + itoa(i) + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + string(args) + `}}`)
			m := s.recv()
			text := resultText(t, m)
			if !isToolError(m) {
				t.Fatalf("%s %q was not refused: %s", tool, p, text)
			}
			// Echoing the client's own argument reveals nothing; anything
			// else naming the host's directories does.
			if leaked := strings.ReplaceAll(text, p, ""); strings.Contains(leaked, fx.root) || strings.Contains(text, fx.secret) {
				t.Fatalf("%s %q: answer reveals a host path or outside content: %s", tool, p, text)
			}
		}
	}
	// An absolute path inside the workspace is fine.
	args, _ := json.Marshal(map[string]any{"path": filepath.Join(fx.dir, "README.md")})
	s.send(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"repo.readFile","arguments":` + string(args) + `}}`)
	if m := s.recv(); isToolError(m) || !strings.Contains(resultText(t, m), "A workspace for troupe") {
		t.Fatalf("absolute path inside the workspace: %v", m)
	}
}

func TestShutdownOnEOFAndSIGTERM(t *testing.T) {
	fx := newFixture(t)
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			s := startServer(t, fx.dir)
			s.initialize("2025-06-18")
			s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo.ripgrep","arguments":{"query":"needle"}}}`)
			// Once the ping is answered the session has taken the call
			// (messages are handled in wire order): it is in flight or done.
			s.send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
			answered := false
			for m := s.recv(); m["id"] != float64(2); m = s.recv() {
				answered = answered || m["id"] == float64(1)
			}
			if how == "eof" {
				s.stdin.Close()
			} else {
				if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			// The call in flight is still answered, then stdout closes.
			if !answered {
				if m := s.recv(); m["id"] != float64(1) {
					t.Fatalf("in-flight call not answered before exit: %v", m)
				}
			}
			select {
			case err := <-s.exited:
				if err != nil {
					t.Fatalf("troupe exited with %v, want 0", err)
				}
				s.exited <- nil // for Cleanup
			case <-time.After(15 * time.Second):
				t.Fatal("troupe did not exit")
			}
			if _, open := <-s.lines; open {
				t.Fatal("more output after the last answer")
			}
		})
	}
}

func TestVersionCommand(t *testing.T) {
	out, err := exec.Command(troupeBinary(t), "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "troupe ") {
		t.Fatalf("troupe version: %q, %v", out, err)
	}
}

func assertToolError(t *testing.T, m map[string]any, mention string) {
	t.Helper()
	text := resultText(t, m)
	if !isToolError(m) || !strings.Contains(text, mention) || !strings.Contains(text, "correlation id") {
		t.Fatalf("want an isError result mentioning %q with a correlation id, got %v", mention, m)
	}
}

func isToolError(m map[string]any) bool {
	r, _ := m["result"].(map[string]any)
	return r != nil && r["isError"] == true
}

func resultText(t *testing.T, m map[string]any) string {
	t.Helper()
	r, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("want a result, got %v", m)
	}
	var b strings.Builder
	content, _ := r["content"].([]any)
	for _, c := range content {
		if cm, ok := c.(map[string]any); ok {
			b.WriteString(cm["text"].(string))
		}
	}
	return b.String()
}

func itoa(i int) string { return strconv.Itoa(i) }

// lockedWriter collects the server's stderr; exec copies into it from its
// own goroutine while the test may read it.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// String returns what has been written so far; safe while exec still writes.
func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func TestDeniedToolsAreInvisibleAndUncallable(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir, "-c", `tools.deny=["repo.rip*"]`)
	s.initialize("2025-06-18")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var names []string
	for _, tl := range s.recv()["result"].(map[string]any)["tools"].([]any) {
		names = append(names, tl.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "docs.fetch,fs.writeFile,repo.listDir,repo.readFile,shell.exec" {
		t.Fatalf("tools/list with repo.rip* denied: %v", names)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.ripgrep","arguments":{"query":"x"}}}`)
	assertToolError(t, s.recv(), "repo.ripgrep")
}

// stderrText is the server's log so far.
func (s *stdioServer) stderrText() string { return s.errw.String() }

func TestDocsFetchRefusesHostsNotAllowed(t *testing.T) {
	fx := newFixture(t)
	s := startServer(t, fx.dir, "-c", `docs.allowed_domains=["go.dev"]`)
	s.initialize("2025-06-18")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"docs.fetch","arguments":{"url":"http://169.254.169.254/latest/meta-data"}}}`)
	m := s.recv()
	text := resultText(t, m)
	if !isToolError(m) || !strings.Contains(text, "allowed_domains") || !strings.Contains(text, "permission_denied") {
		t.Fatalf("want a permission_denied result saying how to allow the host, got %s", text)
	}
}

// TestSandboxedRunUsesTheStandaloneHelper runs a command tool under the
// default profile with troupe-sandbox beside troupe (as the harness builds
// them, and as an installation has them): the call works, and the probe
// chose the standalone helper, not troupe itself.
func TestSandboxedRunUsesTheStandaloneHelper(t *testing.T) {
	helper := filepath.Join(filepath.Dir(troupeBinary(t)), "troupe-sandbox")
	if _, err := os.Stat(helper); err != nil {
		t.Skipf("no troupe-sandbox beside the binary under test: %v", err)
	}
	fx := newFixture(t)
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	if err := os.WriteFile(cfg, []byte(`[mcp.hello]
command = "/bin/echo"
args = ["hello from the sandbox"]
sandbox_profile = "default"
requires_approval = false
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fx.dir, "--config", cfg)
	s.initialize("2025-06-18")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hello","arguments":{}}}`)
	m := s.recv()
	if isToolError(m) || !strings.Contains(resultText(t, m), "hello from the sandbox") {
		t.Fatalf("sandboxed call: %v", m)
	}
	if log := s.stderrText(); !strings.Contains(log, "helper="+helper) {
		t.Fatalf("the probe did not choose %s:\n%s", helper, log)
	}
}
