package downstream_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"troupe/downstream"
	"troupe/protocol"
	"troupe/redact"
)

// logBuffer collects the client's log records as text, for assertions.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// fakeConfig runs the test binary as the fake server in mode.
func fakeConfig(t *testing.T, mode string, logs *logBuffer) downstream.Config {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := downstream.Config{
		Name:    "fake",
		Command: exe,
		// GORACE: a race-enabled binary otherwise sleeps 1 s at exit.
		Env:        map[string]string{serverVar: mode, "GORACE": "atexit_sleep_ms=0", "ONLY_THIS": "1"},
		ClientInfo: protocol.Implementation{Name: "troupe-test", Version: "0"},
	}
	if logs != nil {
		cfg.Logger = logs.logger()
	}
	return cfg
}

func dial(t *testing.T, cfg downstream.Config, h downstream.Handlers) *downstream.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := downstream.Dial(ctx, cfg, h)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// resultText joins the text blocks of a CallToolResult.
func resultText(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	var b strings.Builder
	for _, c := range r.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func call(t *testing.T, c *downstream.Client, name, args string, obs downstream.Observer) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var a json.RawMessage
	if args != "" {
		a = json.RawMessage(args)
	}
	res, err := c.CallTool(ctx, name, a, obs)
	if err != nil {
		t.Fatalf("CallTool %s: %v", name, err)
	}
	return resultText(t, res)
}

func TestStdioHandshakeListAndCall(t *testing.T) {
	logs := &logBuffer{}
	c := dial(t, fakeConfig(t, "normal", logs), downstream.Handlers{})
	if c.ServerInfo().Name != "fake" || c.ProtocolVersion() != protocol.Latest {
		t.Fatalf("server %+v, version %s", c.ServerInfo(), c.ProtocolVersion())
	}
	ctx := context.Background()
	tools, err := c.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string{}, rawTools[0]...), rawTools[1]...)
	if len(tools) != len(want) {
		t.Fatalf("got %d tools over two pages, want %d", len(tools), len(want))
	}
	for i := range want {
		if string(tools[i]) != want[i] {
			t.Errorf("tool %d changed on the way:\n got %s\nwant %s", i, tools[i], want[i])
		}
	}
	args := `{"z":1,"a":[1.50,2e3],"s":"x"}`
	if got := call(t, c, "echo", args, downstream.Observer{}); got != args {
		t.Errorf("arguments arrived as %s, want %s", got, args)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	// A malformed line from the server costs that line only.
	if got := call(t, c, "badline", "", downstream.Observer{}); got != "after the bad line" {
		t.Errorf("after a bad line: %q", got)
	}
	// The child's stderr is logged with the server's name.
	waitFor(t, "the stderr line in the log", func() bool {
		return strings.Contains(logs.String(), "fake server starting") && strings.Contains(logs.String(), "server=fake")
	})
}

func TestStdioEnvironmentIsComplete(t *testing.T) {
	cfg := fakeConfig(t, "normal", nil)
	cfg.Cwd = t.TempDir()
	c := dial(t, cfg, downstream.Handlers{})
	got := call(t, c, "env", "", downstream.Observer{})
	lines := strings.Split(got, "\n")
	if lines[0] != cfg.Cwd {
		t.Errorf("cwd %q, want %q", lines[0], cfg.Cwd)
	}
	for _, kv := range lines[1:] {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := cfg.Env[k]; !ok {
			t.Errorf("the child inherited %s", k)
		}
	}
	if !strings.Contains(got, "ONLY_THIS=1") {
		t.Errorf("the configured environment is missing: %q", got)
	}
}

func TestStdioCommandOnChildPath(t *testing.T) {
	exe, _ := os.Executable()
	dir := t.TempDir()
	if err := os.Symlink(exe, dir+"/fake-mcp"); err != nil {
		t.Fatal(err)
	}
	cfg := fakeConfig(t, "normal", nil)
	cfg.Command = "fake-mcp"
	cfg.Env["PATH"] = "/nonexistent:" + dir
	dial(t, cfg, downstream.Handlers{})

	cfg.Command = "no-such-server"
	if _, err := downstream.Dial(context.Background(), cfg, downstream.Handlers{}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a missing command: %v", err)
	}
}

func TestStdioCustomStart(t *testing.T) {
	var started atomic.Int32
	cfg := fakeConfig(t, "normal", nil)
	cfg.Start = func(cmd *exec.Cmd) (func(), error) {
		started.Add(1)
		if cmd.SysProcAttr != nil || cmd.Stdin == nil || cmd.Stdout == nil || cmd.Stderr == nil || cmd.Env == nil {
			t.Errorf("the prepared command is not as documented: %+v", cmd)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		pid := cmd.Process.Pid
		return func() { _ = syscall.Kill(-pid, syscall.SIGKILL) }, nil
	}
	c := dial(t, cfg, downstream.Handlers{})
	if started.Load() != 1 {
		t.Fatalf("Start called %d times", started.Load())
	}
	if got := call(t, c, "echo", `{}`, downstream.Observer{}); got != `{}` {
		t.Fatalf("echo: %q", got)
	}
}

// observed records what an Observer received.
type observed struct {
	mu       sync.Mutex
	progress []string
	logs     []string
	elicits  []string
}

func (o *observed) observer(answer string) downstream.Observer {
	obs := downstream.Observer{
		Progress: func(p, total float64, msg string) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.progress = append(o.progress, strings.TrimSpace(strings.Join([]string{ftoa(p), ftoa(total), msg}, " ")))
		},
		Log: func(level protocol.LoggingLevel, logger string, data json.RawMessage) {
			o.mu.Lock()
			defer o.mu.Unlock()
			o.logs = append(o.logs, string(level)+" "+logger+" "+string(data))
		},
	}
	if answer != "" {
		obs.Elicit = func(_ context.Context, params json.RawMessage) (json.RawMessage, error) {
			o.mu.Lock()
			o.elicits = append(o.elicits, string(params))
			o.mu.Unlock()
			return json.RawMessage(answer), nil
		}
	}
	return obs
}

func (o *observed) snapshot() (progress, logs, elicits []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string{}, o.progress...), append([]string{}, o.logs...), append([]string{}, o.elicits...)
}

func ftoa(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func TestStdioObserverGetsProgressLogAndElicitation(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	var o observed
	got := call(t, c, "chatty", "", o.observer(`{"action":"accept","content":{"ok":true}}`))
	if got != `elicited {"action":"accept","content":{"ok":true}}` {
		t.Errorf("the server got %q", got)
	}
	progress, logs, elicits := o.snapshot()
	if strings.Join(progress, ";") != "1 2 half;2 2 done" {
		t.Errorf("progress %q", progress)
	}
	if len(logs) != 1 || logs[0] != `info fake {"n":1}` {
		t.Errorf("logs %q", logs)
	}
	if len(elicits) != 1 || !strings.Contains(elicits[0], `"message":"ok?"`) {
		t.Errorf("elicitations %q", elicits)
	}

	// Without Elicit the client declines.
	if got := call(t, c, "chatty", "", downstream.Observer{}); got != `elicited {"action":"decline"}` {
		t.Errorf("without an Elicit the server got %q", got)
	}
}

func TestStdioServerRequestsAnsweredByTheClient(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	got := call(t, c, "pingme", "", downstream.Observer{})
	parts := strings.Split(got, "|")
	if len(parts) != 3 || parts[0] != `{}` || parts[1] != `{"roots":[]}` || !strings.Contains(parts[2], `-32601`) {
		t.Fatalf("answers: %q", got)
	}
}

// TestStdioAttribution: with two calls in flight, a log message or an
// elicitation that names no call goes to neither.
func TestStdioAttribution(t *testing.T) {
	logs := &logBuffer{}
	c := dial(t, fakeConfig(t, "normal", logs), downstream.Handlers{})
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{}, 1)
	var slowObs observed
	obs := slowObs.observer(`{"action":"accept","content":{}}`)
	inner := obs.Progress
	obs.Progress = func(p, total float64, msg string) {
		inner(p, total, msg)
		started <- struct{}{}
	}
	slowDone := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "slow", nil, obs)
		slowDone <- err
	}()
	<-started

	var o observed
	got := call(t, c, "chatty", "", o.observer(`{"action":"accept","content":{}}`))
	if got != `elicited {"action":"decline"}` {
		t.Errorf("with two calls in flight the elicitation was answered: %q", got)
	}
	progress, clogs, elicits := o.snapshot()
	if len(progress) != 2 {
		t.Errorf("progress is matched by token and should arrive: %q", progress)
	}
	if len(clogs) != 0 || len(elicits) != 0 {
		t.Errorf("chatty's observer got unattributable traffic: logs %q, elicits %q", clogs, elicits)
	}
	_, slogs, selicits := slowObs.snapshot()
	if len(slogs) != 0 || len(selicits) != 0 {
		t.Errorf("slow's observer got another call's traffic: logs %q, elicits %q", slogs, selicits)
	}
	if !strings.Contains(logs.String(), "downstream log message") {
		t.Errorf("the unattributed log message was not logged:\n%s", logs)
	}
	cancel()
	if err := <-slowDone; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled slow call: %v", err)
	}
}

// A call parked for its 2026-07-28 caller's answer waits in its question
// to a session-based stdio server; it must not hold the server's questions
// for every other call (issue 23: one parked call made the server decline
// every other caller's elicitation for approvals.timeout). Another call's
// elicitation reaches that call's client, the parked call still gets its
// own answer afterwards, and two calls that could both be asking still get
// neither's question.
func TestStdioParkedCallLeavesElicitationToOthers(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	ctx := context.Background()
	_, err := c.CallTool(ctx, "chatty", nil, downstream.Observer{Rounds: true})
	var ir *downstream.InputRequired
	if !errors.As(err, &ir) || !strings.Contains(string(ir.Requests["elicitation"]), "ok?") {
		t.Fatalf("want the parked question, got %v", err)
	}

	var other observed
	if got := call(t, c, "chatty", "", other.observer(`{"action":"accept","content":{"who":"other"}}`)); got != `elicited {"action":"accept","content":{"who":"other"}}` {
		t.Fatalf("beside a parked call, another call's elicitation was not relayed to its caller: %q", got)
	}
	if _, _, elicits := other.snapshot(); len(elicits) != 1 {
		t.Fatalf("the other call's client saw %d questions, want its one", len(elicits))
	}

	// Beside the parked call, two calls that may both be asking: the
	// question belongs to neither for sure, so it is declined.
	slowCtx, cancelSlow := context.WithCancel(ctx)
	started := make(chan struct{}, 1)
	var slowObs observed
	obs := slowObs.observer(`{"action":"accept","content":{}}`)
	obs.Progress = func(float64, float64, string) {
		select {
		case started <- struct{}{}:
		default:
		}
	}
	slowDone := make(chan error, 1)
	go func() {
		_, err := c.CallTool(slowCtx, "slow", nil, obs)
		slowDone <- err
	}()
	<-started
	var third observed
	if got := call(t, c, "chatty", "", third.observer(`{"action":"accept","content":{}}`)); got != `elicited {"action":"decline"}` {
		t.Errorf("with two calls that may ask, the elicitation was answered: %q", got)
	}
	if _, _, e := slowObs.snapshot(); len(e) != 0 {
		t.Errorf("the slow call's client got another call's question: %q", e)
	}
	cancelSlow()
	<-slowDone

	res, err := c.CallTool(ctx, "chatty", nil, downstream.Observer{Rounds: true, Resume: &downstream.Resume{State: ir.State,
		Responses: map[string]json.RawMessage{"elicitation": json.RawMessage(`{"action":"accept","content":{"who":"parked"}}`)}}})
	if err != nil || resultText(t, res) != `elicited {"action":"accept","content":{"who":"parked"}}` {
		t.Fatalf("the parked call, resumed: %s %v", res, err)
	}
}

func TestStdioCancellationReachesTheServer(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	cause := errors.New("the user gave up")
	ctx, cancel := context.WithCancelCause(context.Background())
	started := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		_, err := c.CallTool(ctx, "slow", nil, downstream.Observer{Progress: func(float64, float64, string) { started <- struct{}{} }})
		done <- err
	}()
	<-started
	t0 := time.Now()
	cancel(cause)
	if err := <-done; err != cause {
		t.Fatalf("CallTool returned %v, want the context's cause", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("returned %v after the cancel", d)
	}
	waitFor(t, "notifications/cancelled at the server", func() bool {
		return strings.Contains(call(t, c, "cancellations", "", downstream.Observer{}), ":cancelled by the client")
	})
	// The connection is still good.
	if got := call(t, c, "echo", `{"after":1}`, downstream.Observer{}); got != `{"after":1}` {
		t.Fatalf("echo after a cancel: %q", got)
	}
}

func TestStdioToolErrors(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	res, err := c.CallTool(context.Background(), "fail", nil, downstream.Observer{})
	if err != nil || !strings.Contains(string(res), `"isError":true`) {
		t.Fatalf("an isError result: %s, %v", res, err)
	}
	_, err = c.CallTool(context.Background(), "rpcerr", nil, downstream.Observer{})
	var rpc *downstream.RPCError
	if !errors.As(err, &rpc) || rpc.Code != -32602 || rpc.Message != "bad arguments" || string(rpc.Data) != `{"field":"q"}` {
		t.Fatalf("a JSON-RPC error: %#v", err)
	}
	if _, err := c.CallTool(context.Background(), "echo", json.RawMessage(`[1]`), downstream.Observer{}); err == nil {
		t.Fatal("non-object arguments were sent")
	}
}

func TestStdioToolsChanged(t *testing.T) {
	changed := make(chan struct{}, 1)
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{ToolsChanged: func() { changed <- struct{}{} }})
	call(t, c, "notify", "", downstream.Observer{})
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("ToolsChanged was not called")
	}
}

func TestStdioServerExitsMidCall(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	started := make(chan time.Time, 1)
	_, err := c.CallTool(context.Background(), "die", nil, downstream.Observer{Progress: func(float64, float64, string) { started <- time.Now() }})
	if !errors.Is(err, downstream.ErrClosed) {
		t.Fatalf("CallTool: %v, want ErrClosed", err)
	}
	if d := time.Since(<-started); d > time.Second {
		t.Errorf("the call failed %v after the progress (the server dies 50 ms after it)", d)
	}
	select {
	case <-c.Done():
	case <-time.After(time.Second):
		t.Fatal("Done not closed")
	}
	if err := c.Err(); !errors.Is(err, downstream.ErrClosed) || !strings.Contains(err.Error(), "the server exited with status 3") {
		t.Errorf("Err: %v", err)
	}
	if _, err := c.CallTool(context.Background(), "echo", nil, downstream.Observer{}); !errors.Is(err, downstream.ErrClosed) {
		t.Errorf("a call after the end: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestStdioDialTimeoutKillsTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	_, err := downstream.Dial(ctx, fakeConfig(t, "mute", nil), downstream.Handlers{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial against a mute server: %v", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Dial took %v to give up", d)
	}
	// goleak (TestMain) checks that nothing was left running.
}

func TestStdioVersionNegotiation(t *testing.T) {
	c := dial(t, fakeConfig(t, "old", nil), downstream.Handlers{})
	if c.ProtocolVersion() != protocol.V20250326 {
		t.Errorf("negotiated %s", c.ProtocolVersion())
	}
	_, err := downstream.Dial(context.Background(), fakeConfig(t, "alien", nil), downstream.Handlers{})
	if err == nil || !strings.Contains(err.Error(), "1999-01-01") {
		t.Fatalf("an unsupported version was accepted: %v", err)
	}
}

func TestStdioCloseKillsAStubbornServer(t *testing.T) {
	c := dial(t, fakeConfig(t, "stubborn", nil), downstream.Handlers{})
	pid := downstream.PID(c)
	t0 := time.Now()
	c.Close()
	d := time.Since(t0)
	if d < 1900*time.Millisecond || d > 4*time.Second {
		t.Errorf("Close took %v; want SIGKILL about 2 s after SIGTERM", d)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the server process %d still exists: %v", pid, err)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done not closed after Close")
	}
	c.Close() // idempotent
}

func TestStdioCloseIsQuickForAPoliteServer(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	t0 := time.Now()
	c.Close()
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Close took %v", d)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A server that exits before it answers makes Dial fail with its exit
// status and the last lines of its stderr, secrets masked, and bounded:
// not "connection closed".
func TestStdioDialFailureSaysHowTheServerEnded(t *testing.T) {
	script := `for i in $(seq 1 40); do echo "noise $i" >&2; done
echo "npm error code EROFS" >&2
echo "npm error token s3cr3t-value in the way" >&2
exit 243`
	cfg := downstream.Config{Name: "npx", Command: "/bin/sh", Args: []string{"-c", script},
		Env: map[string]string{"PATH": "/usr/bin:/bin"}, Redact: redact.New("s3cr3t-value")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := downstream.Dial(ctx, cfg, downstream.Handlers{})
	if err == nil {
		t.Fatal("Dial succeeded")
	}
	msg := err.Error()
	var exit *downstream.ExitError
	if !errors.As(err, &exit) || exit.Status != 243 || !errors.Is(err, downstream.ErrClosed) {
		t.Fatalf("Dial: %v (want an ExitError with status 243 that is ErrClosed)", err)
	}
	for _, want := range []string{`upstream "npx": connecting: the server exited with status 243`,
		"npm error code EROFS", "npm error token [redacted] in the way"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Dial's error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "s3cr3t-value") || strings.Contains(msg, "connection closed") ||
		strings.Contains(msg, "noise 1 ") || strings.Count(msg, `upstream "npx"`) != 1 {
		t.Errorf("Dial's error: %s", msg)
	}
	if len(exit.Stderr) != 20 || exit.Stderr[19] != "npm error token [redacted] in the way" {
		t.Errorf("stderr tail: %q", exit.Stderr)
	}
}

func TestStdioDialFailureSaysTheSignal(t *testing.T) {
	cfg := downstream.Config{Name: "k", Command: "/bin/sh", Args: []string{"-c", "echo dying >&2; kill -KILL $$"},
		Env: map[string]string{"PATH": "/usr/bin:/bin"}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := downstream.Dial(ctx, cfg, downstream.Handlers{})
	if err == nil || !strings.Contains(err.Error(), "the server was killed by signal killed; its stderr ended with: dying") {
		t.Fatalf("Dial: %v", err)
	}
}
