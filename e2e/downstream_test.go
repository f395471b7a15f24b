package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Downstream servers through troupe: the same calls as
// downstream_direct_test.go, made through troupe's [mcp_servers], must
// give the same answers.

// downstreamConfig writes a troupe config with the given [mcp_servers]
// tables and returns its path.
//
// troupe then waits for its downstream servers at start
// (waitForDownstreams) unless tables say otherwise: the tests list tools at
// once, and a server slower than the default wait (500ms) on a loaded
// machine would be missing from that first list.
func downstreamConfig(t *testing.T, tables string) string {
	t.Helper()
	if !strings.Contains(tables, "mcp_servers_startup_wait") {
		tables += waitForDownstreams
	}
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, []byte(tables), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// stdioServerTable is an [mcp_servers.<name>] table for a stdio server.
func stdioServerTable(name, command string, args []string, extra string) string {
	quoted, _ := json.Marshal(args)
	return fmt.Sprintf("[mcp_servers.%s]\ncommand = %q\nargs = %s\nenv_vars = [\"PATH\", \"HOME\"]\n%s\n", name, command, quoted, extra)
}

// prefixed renames steps' tools to their troupe names.
func prefixed(prefix string, steps []step) []step {
	out := slices.Clone(steps)
	for i := range out {
		if out[i].Op == "callTool" {
			out[i].Name = prefix + "." + out[i].Name
		}
	}
	return out
}

// throughTroupe runs steps against troupe serving configFile over stdio.
func throughTroupe(t *testing.T, configFile string, steps []step, answers ...map[string]any) result {
	t.Helper()
	fx := newFixture(t)
	tr := stdioTransport(t, fx.dir)
	tr.Args = append(tr.Args, "--config", configFile)
	return runScenario(t, scenario{Transport: tr, Steps: steps, Elicitation: answers})
}

// listedNames is the tool names of a listTools step.
func listedNames(t *testing.T, got stepResult) []string {
	t.Helper()
	var r struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(got.Result, &r); err != nil {
		t.Fatalf("listTools: %v", got)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func everythingThroughTroupe(t *testing.T, table string) {
	requireDownstream(t)
	cfg := downstreamConfig(t, table)
	via := throughTroupe(t, cfg, append([]step{listTools()}, prefixed("everything", everythingCalls())...))
	names := listedNames(t, via.Steps[0])
	for _, tool := range everythingTools {
		if !slices.Contains(names, "everything."+tool) {
			t.Errorf("troupe does not list everything.%s: %q", tool, names)
		}
	}
	command, args := everythingStdioCommand(t)
	direct := runScenario(t, scenario{Transport: transport{Kind: "stdio", Command: command, Args: args},
		Steps: append([]step{listTools()}, everythingCalls()...)})
	// The listings differ by name; the calls must not differ at all.
	via.Steps, direct.Steps = via.Steps[1:], direct.Steps[1:]
	sameResults(t, via, direct)
}

func TestDownstreamEverythingThroughTroupeStdio(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	everythingThroughTroupe(t, stdioServerTable("everything", command, args, "requires_approval = false"))
}

func TestDownstreamEverythingThroughTroupeHTTP(t *testing.T) {
	requireDownstream(t)
	endpoint := startEverythingHTTP(t)
	everythingThroughTroupe(t, fmt.Sprintf("[mcp_servers.everything]\nurl = %q\nrequires_approval = false\n", endpoint))
}

func TestDownstreamFilesystemThroughTroupe(t *testing.T) {
	requireDownstream(t)
	fx := newFixture(t)
	command, args := filesystemStdioCommand(t, fx.dir)
	cfg := downstreamConfig(t, stdioServerTable("fs", command, args, ""))
	steps := []step{
		callTool("read_text_file", map[string]any{"path": filepath.Join(fx.dir, "README.md")}),
		callTool("list_allowed_directories", map[string]any{}),
		callTool("read_text_file", map[string]any{"path": "/etc/passwd"}), // outside: a tool error
	}
	// read tools are annotated read-only: no approval needed.
	tr := stdioTransport(t, fx.dir)
	tr.Args = append(tr.Args, "--config", cfg)
	via := runScenario(t, scenario{Transport: tr, Steps: prefixed("fs", steps)})
	direct := runScenario(t, scenario{Transport: transport{Kind: "stdio", Command: command, Args: args}, Steps: steps})
	sameResults(t, via, direct)
	if !strings.Contains(string(via.Steps[0].Result), "A workspace for troupe") {
		t.Errorf("read_text_file through troupe: %s", via.Steps[0])
	}
}

// Progress and elicitation from a downstream reach the calling client;
// the call itself passes troupe's approval gate first.
func TestDownstreamRelaysProgressAndElicitation(t *testing.T) {
	requireDownstream(t)
	command, args := everythingStdioCommand(t)
	cfg := downstreamConfig(t, stdioServerTable("everything", command, args, ""))
	long := map[string]any{"duration": 0.4, "steps": 4}
	progress := callTool("everything.trigger-long-running-operation", long)
	progress.Progress = true
	res := throughTroupe(t, cfg, []step{progress, callTool("everything.trigger-elicitation-request", nil)},
		// troupe's approval of the long operation (the elicitation tool is
		// annotated read-only: no approval), then the downstream's question.
		map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}},
		map[string]any{"action": "accept", "content": map[string]any{"name": "Ada", "check": true}})
	if !res.Steps[0].OK || res.Steps[0].ProgressCount < 3 {
		t.Errorf("long operation through troupe: %v (progress %d)", res.Steps[0], res.Steps[0].ProgressCount)
	}
	if !strings.Contains(string(res.Steps[1].Result), `Name: Ada`) {
		t.Errorf("elicitation through troupe: %v", res.Steps[1])
	}
	if len(res.Elicitations) != 2 || !strings.Contains(string(res.Elicitations[0]), "troupe asks") ||
		!strings.Contains(string(res.Elicitations[1]), "Please provide inputs") {
		t.Errorf("elicitations: %d, last %s", len(res.Elicitations), res.Elicitations[len(res.Elicitations)-1])
	}
}

// childWithArg finds a child of ppid named comm whose command line
// contains arg.
func childWithArg(ppid int, comm, arg string) int {
	for pid := range childrenOf(ppid, comm) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); strings.Contains(string(b), arg) {
			return pid
		}
	}
	return 0
}

// childrenOf yields the processes whose parent is ppid and whose command
// is comm.
func childrenOf(ppid int, comm string) func(func(int) bool) {
	return func(yield func(int) bool) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
			s := string(b)
			open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
			if open < 0 || close < 0 || s[open+1:close] != comm {
				continue
			}
			if f := strings.Fields(s[close+1:]); len(f) > 2 && f[1] == strconv.Itoa(ppid) && !yield(pid) {
				return
			}
		}
	}
}

// A downstream killed mid-call: the call fails fast, troupe's own tools
// and other sessions go on, and the server is back after a reconnect.
func TestDownstreamKilledMidCall(t *testing.T) {
	requireDownstream(t)
	fx := newFixture(t)
	command, args := everythingStdioCommand(t)
	fsCommand, fsArgs := filesystemStdioCommand(t, fx.dir)
	cfg := downstreamConfig(t, stdioServerTable("everything", command, args, "requires_approval = false")+
		stdioServerTable("fs", fsCommand, fsArgs, ""))
	s := startServer(t, fx.dir, "--config", cfg)
	s.initialize("2025-11-25")
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"everything.trigger-long-running-operation","arguments":{"duration":60,"steps":60}}}`)
	var node int
	for deadline := time.Now().Add(10 * time.Second); node == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		node = childWithArg(s.cmd.Process.Pid, "node", "server-everything")
	}
	if node == 0 {
		t.Fatal("no node child of troupe")
	}
	time.Sleep(300 * time.Millisecond) // let the call reach the server
	killed := time.Now()
	if err := syscallKill(node); err != nil {
		t.Fatal(err)
	}
	m := s.recvResponse()
	if took := time.Since(killed); took > 3*time.Second {
		t.Errorf("the call took %s to fail after the kill", took)
	}
	if !isToolError(m) || !strings.Contains(resultText(t, m), "not connected") {
		t.Fatalf("call to a killed server: %v", m)
	}
	// troupe's own tools and the other server are unaffected.
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"repo.listDir","arguments":{"path":"."}}}`)
	if m := s.recvResponse(); isToolError(m) {
		t.Fatalf("repo.listDir after the kill: %v", m)
	}
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs.list_allowed_directories","arguments":{}}}`)
	if m := s.recvResponse(); isToolError(m) {
		t.Fatalf("the other server after the kill: %v", m)
	}
	// The server comes back.
	for i := 0; ; i++ {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"everything.echo","arguments":{"message":"back"}}}`, 100+i))
		m := s.recvResponse()
		if !isToolError(m) && strings.Contains(resultText(t, m), "Echo: back") {
			break
		}
		if i > 50 {
			t.Fatalf("the server did not come back: %v", m)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

// recvResponse is the next response, skipping notifications.
func (s *stdioServer) recvResponse() map[string]any {
	s.t.Helper()
	for {
		if m := s.recv(); m["id"] != nil {
			return m
		}
	}
}

// troupe tools connects to each server and says how it is.
func TestToolsCommandShowsServerStates(t *testing.T) {
	requireDownstream(t)
	fx := newFixture(t)
	command, args := everythingStdioCommand(t)
	cfg := downstreamConfig(t, stdioServerTable("everything", command, args, "")+
		"[mcp_servers.broken]\ncommand = \"/nonexistent/server\"\nstartup_timeout_sec = 2\n")
	out, err := exec.Command(troupeBinary(t), "tools", "--workspace", fx.dir, "--config", cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("troupe tools: %v\n%s", err, out)
	}
	text := string(out)
	if !strings.Contains(text, "server everything: ready,") || !strings.Contains(text, "server broken: down") ||
		!strings.Contains(text, "everything.echo") {
		t.Fatalf("troupe tools:\n%s", text)
	}
}
