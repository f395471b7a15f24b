package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"troupe/protocol"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/tools/command"
	"troupe/tools/tooltest"
)

// helperVar, set in a tool's env, makes the test binary act as the
// program: it prints what it was given (see helperMain).
const helperVar = "COMMAND_TEST_HELPER"

func TestMain(m *testing.M) {
	sandbox.RunHelperIfAsked() // the sandbox re-executes this binary as its helper
	if os.Getenv(helperVar) != "" {
		helperMain()
		return
	}
	goleak.VerifyTestMain(m)
}

// seen is what the helper program reports about itself.
type seen struct {
	Args  []string `json:"args"`
	Stdin string   `json:"stdin"`
	Cwd   string   `json:"cwd"`
	Env   []string `json:"env"`
}

// helperMain prints the helper's argv (after argv[0]), stdin, working
// directory and environment as JSON, then exits with the status in
// $HELPER_EXIT (default 0).
func helperMain() {
	in, _ := io.ReadAll(os.Stdin)
	wd, _ := os.Getwd()
	_ = json.NewEncoder(os.Stdout).Encode(seen{Args: os.Args[1:], Stdin: string(in), Cwd: wd, Env: os.Environ()})
	code, _ := strconv.Atoi(os.Getenv("HELPER_EXIT"))
	os.Exit(code)
}

// helperDef is a definition whose program is the helper.
func helperDef(t testing.TB, args []string, schema string) command.Definition {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	def := command.Definition{
		Name:    "helper",
		Command: exe,
		Args:    args,
		// GORACE: a race-enabled binary otherwise sleeps 1 s at exit.
		Env: map[string]string{helperVar: "1", "GORACE": "atexit_sleep_ms=0"},
	}
	if schema != "" {
		def.InputSchema = json.RawMessage(schema)
	}
	return def
}

// shDef is a definition that runs script with sh -c; extra become $1...
func shDef(script string, extra ...string) command.Definition {
	return command.Definition{
		Name:    "sh",
		Command: "sh",
		Args:    append([]string{"-c", script, "sh"}, extra...),
	}
}

// newTool builds def in workspace (a fresh one when "").
//
// Tools without a profile run unsandboxed here: these tests are about the
// process lifecycle and the mapping of results; sandbox_test.go runs
// programs under the default profile.
func newTool(t testing.TB, def command.Definition, workspace string) tools.Tool {
	t.Helper()
	if def.SandboxProfile == "" {
		def.SandboxProfile = "none"
	}
	if workspace == "" {
		workspace = t.TempDir()
	}
	tl, err := command.New(def, workspace)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// call runs the tool the way troupe does: register, validate, call.
func call(ctx context.Context, t testing.TB, tl tools.Tool, args any, req *tools.Request) (*protocol.CallToolResult, error) {
	t.Helper()
	reg, err := tools.NewRegistry(tl)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup(tl.Spec().Name)
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	valid, err := e.Validate(raw)
	if err != nil {
		t.Fatalf("arguments %s rejected: %v", raw, err)
	}
	if req == nil {
		req = &tools.Request{}
	}
	req.Arguments = valid
	return e.Tool.Call(ctx, req)
}

// callSeen runs a helper tool and decodes what the helper saw.
func callSeen(t testing.TB, tl tools.Tool, args any, req *tools.Request) seen {
	t.Helper()
	res, err := call(testCtx(t, 30*time.Second), t, tl, args, req)
	if err != nil {
		t.Fatal(err)
	}
	var s seen
	if err := json.Unmarshal([]byte(res.Content[0].Text), &s); err != nil {
		t.Fatalf("%v in %q", err, res.Content[0].Text)
	}
	return s
}

// callText runs the tool and returns its successful result's text.
func callText(t testing.TB, tl tools.Tool, args any, req *tools.Request) string {
	t.Helper()
	res, err := call(testCtx(t, 30*time.Second), t, tl, args, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("unexpected result %+v", res)
	}
	return res.Content[0].Text
}

// wantToolError checks that err is a *tools.Error of the kind whose
// message names none of the hidden strings.
func wantToolError(t testing.TB, err error, kind tools.Kind, hidden ...string) *tools.Error {
	t.Helper()
	te := tooltest.WantError(t, err, kind)
	for _, h := range hidden {
		if h != "" && strings.Contains(te.Message, h) {
			t.Fatalf("message %q reveals %q", te.Message, h)
		}
	}
	return te
}

// testCtx is a context that ends before the test's own deadline, so a
// hanging call fails the test instead of the whole binary.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// readPIDs reads the pids a test script appended to path, one a line,
// waiting until there are n.
func readPIDs(t testing.TB, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("pid file %q: %v", b, err)
			}
			pids = append(pids, pid)
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file has %d pids, want %d", len(pids), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a running process. Zombies count as dead:
// the container's init may never reap the orphans a killed group leaves.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// wantGone fails unless every pid is dead within d.
func wantGone(t testing.TB, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, p := range pids {
			if alive(p) {
				left = append(left, p)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes %v still alive %s after the call returned", left, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// recorder is a tools.Reporter that keeps everything it is told.
type recorder struct {
	block    chan struct{} // when set, Ready waits for it to close
	mu       sync.Mutex
	progress []progressEvent
	logs     []logEvent
}

type progressEvent struct {
	done    float64
	message string
	at      time.Time
}

type logEvent struct {
	level protocol.LoggingLevel
	data  map[string]any
}

func (r *recorder) Progress(done, total float64, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.progress = append(r.progress, progressEvent{done, message, time.Now()})
}

func (r *recorder) Log(level protocol.LoggingLevel, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, logEvent{level, data.(map[string]any)})
}

// Ready implements tools.Reporter: a recorder keeps up with anything,
// unless block is set (a stalled client).
func (r *recorder) Ready(ctx context.Context) error {
	if r.block == nil {
		return nil
	}
	select {
	case <-r.block:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeFile writes a file (and its directories) under dir.
func writeFile(t testing.TB, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}
