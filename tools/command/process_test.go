package command_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/command"
)

// stubbornTree starts two sleeps in the background and waits for them,
// with SIGTERM ignored by all three; it records their pids (the shell's
// last) in $1.
const stubbornTree = `trap '' TERM
sleep 100 & echo $! >> "$1"
sleep 100 & echo $! >> "$1"
echo $$ >> "$1"
echo started
echo warming up >&2
wait`

// margin is the slack allowed on top of the timings under test (the race
// detector and a busy machine slow everything down).
const margin = 1500 * time.Millisecond

// A timeout stops a whole process tree that ignores SIGTERM: SIGKILL
// follows after the (default) grace period, every member dies, and the
// error carries the partial output.
func TestTimeoutKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	def := shDef(stubbornTree, pidFile)
	def.Timeout = 300 * time.Millisecond
	tl := newTool(t, def, "")

	start := time.Now()
	_, err := call(testCtx(t, 30*time.Second), t, tl, nil, nil)
	elapsed := time.Since(start)
	te := wantToolError(t, err, tools.KindDeadlineExceeded)
	for _, want := range []string{"300ms", "stdout:\nstarted", "stderr:\nwarming up"} {
		if !strings.Contains(te.Message, want) {
			t.Errorf("message %q lacks %q", te.Message, want)
		}
	}
	if min, max := def.Timeout+command.DefaultKillGrace, def.Timeout+command.DefaultKillGrace+margin; elapsed < min-100*time.Millisecond || elapsed > max {
		t.Errorf("call took %s, want about %s (timeout + grace; the tree ignores SIGTERM)", elapsed, min)
	}
	wantGone(t, readPIDs(t, pidFile, 3), 500*time.Millisecond)
}

// Cancellation does the same, and Call returns ctx.Err().
func TestCancelKillsTheWholeGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	def := shDef(stubbornTree, pidFile)
	def.KillGrace = 500 * time.Millisecond
	tl := newTool(t, def, "")

	ctx, cancel := context.WithCancel(testCtx(t, 30*time.Second))
	type outcome struct {
		err error
		at  time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		_, err := call(ctx, t, tl, nil, nil)
		done <- outcome{err, time.Now()}
	}()
	pids := readPIDs(t, pidFile, 3)
	cancelled := time.Now()
	cancel()
	o := <-done
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", o.err)
	}
	if took := o.at.Sub(cancelled); took < def.KillGrace-100*time.Millisecond || took > def.KillGrace+margin {
		t.Errorf("returned %s after the cancel, want about the grace period %s", took, def.KillGrace)
	}
	wantGone(t, pids, 500*time.Millisecond)
}

// A program that obeys SIGTERM is not kept waiting for the grace period.
func TestCancelIsQuickWhenTheProgramObeys(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	tl := newTool(t, shDef(`sleep 100 & echo $! >> "$1"; echo $$ >> "$1"; wait`, pidFile), "")
	ctx, cancel := context.WithCancel(testCtx(t, 30*time.Second))
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, t, tl, nil, nil)
		done <- err
	}()
	pids := readPIDs(t, pidFile, 2)
	start := time.Now()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > command.DefaultKillGrace/2 {
		t.Errorf("took %s; the group obeyed SIGTERM at once", took)
	}
	wantGone(t, pids, 500*time.Millisecond)
}

// A context deadline before the tool's timeout stops the call first, and
// Call returns the context's error.
func TestContextDeadlineComesFirst(t *testing.T) {
	t.Parallel()
	def := shDef(`sleep 100`)
	def.Timeout = time.Minute
	tl := newTool(t, def, "")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := call(ctx, t, tl, nil, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 200*time.Millisecond+margin {
		t.Fatalf("took %s", took)
	}
}

// A context that is already done runs nothing.
func TestDoneContextRunsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tl := newTool(t, shDef(`touch ran`), dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := call(ctx, t, tl, nil, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Fatal("the program ran")
	}
}

// A background process that keeps stdout open does not hold the call:
// it is in the program's group, and the group is killed when the program
// exits.
func TestBackgroundChildHoldingStdout(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	tl := newTool(t, shDef(`sleep 100 & echo $! >> "$1"; echo hi`, pidFile), "")
	start := time.Now()
	out := callText(t, tl, nil, nil)
	if out != "hi\n" {
		t.Fatalf("output %q", out)
	}
	if took := time.Since(start); took > margin {
		t.Fatalf("call took %s", took)
	}
	wantGone(t, readPIDs(t, pidFile, 1), 500*time.Millisecond)
}

// A grandchild that left the group (setsid) cannot be killed with it; the
// call still returns, cutting off its pipes after a short wait.
func TestEscapedGrandchildDoesNotHang(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pids")
	// The grandchild writes its pid once it has left the group; the
	// program waits for that before it exits.
	tl := newTool(t, shDef(`setsid sh -c 'echo $$ >> "$1"; exec sleep 100' sh "$1" &
		while [ ! -s "$1" ]; do sleep 0.01; done; echo hi`, pidFile), "")
	start := time.Now()
	out := callText(t, tl, nil, nil)
	took := time.Since(start)
	pids := readPIDs(t, pidFile, 1)
	t.Cleanup(func() { _ = syscall.Kill(pids[0], syscall.SIGKILL) })
	if out != "hi\n" {
		t.Fatalf("output %q", out)
	}
	if !alive(pids[0]) {
		t.Fatal("the grandchild did not escape the group; the test proves nothing")
	}
	if took > margin {
		t.Fatalf("call took %s", took)
	}
}

// A non-zero exit is a command_failed error with the status and the end
// of both streams.
func TestNonZeroExit(t *testing.T) {
	t.Parallel()
	tl := newTool(t, shDef(`echo partial result; echo "oops: bad input" >&2; exit 3`), "")
	_, err := call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	te := wantToolError(t, err, command.KindCommandFailed)
	for _, want := range []string{"status 3", "stdout:\npartial result", "stderr:\noops: bad input"} {
		if !strings.Contains(te.Message, want) {
			t.Errorf("message %q lacks %q", te.Message, want)
		}
	}
}

// Only the end of a long stderr is shown.
func TestNonZeroExitShowsTheEndOfStderr(t *testing.T) {
	t.Parallel()
	tl := newTool(t, shDef(`i=0; while [ $i -lt 2000 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "the real reason" >&2; exit 1`), "")
	_, err := call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	te := wantToolError(t, err, command.KindCommandFailed)
	if !strings.HasSuffix(te.Message, "the real reason\n") || strings.Contains(te.Message, "noise line 0\n") {
		t.Fatalf("message does not end with stderr's end: %q", te.Message)
	}
	if len(te.Message) > 2<<10+200 {
		t.Fatalf("message is %d bytes", len(te.Message))
	}
	if !strings.Contains(te.Message, "stderr (the last 2048 of") {
		t.Fatalf("message %q does not say stderr was cut", te.Message[:200])
	}
}

func TestKilledBySignal(t *testing.T) {
	t.Parallel()
	tl := newTool(t, shDef(`kill -KILL $$`), "")
	_, err := call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	te := wantToolError(t, err, command.KindCommandFailed)
	if !strings.Contains(te.Message, "killed by signal SIGKILL (killed)") || !strings.Contains(te.Message, "It wrote no output") {
		t.Fatalf("message %q", te.Message)
	}
}

// A program that disappears or stops being executable after New is an
// internal error naming the configured command, not a host error text.
func TestStartFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	if err := os.Symlink("/bin/true", prog); err != nil {
		t.Fatal(err)
	}
	tl := newTool(t, command.Definition{Name: "gone", Command: prog}, "")
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	_, err := call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	te := wantToolError(t, err, tools.KindInternal)
	if !strings.Contains(te.Message, `command "`+prog+`" cannot be run: no such file`) {
		t.Fatalf("message %q", te.Message)
	}

	data := writeFile(t, dir, "data", "not a program", 0o755)
	tl = newTool(t, command.Definition{Name: "chmod", Command: data}, "")
	if err := os.Chmod(data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	te = wantToolError(t, err, tools.KindInternal)
	if !strings.Contains(te.Message, "permission denied") {
		t.Fatalf("message %q", te.Message)
	}

	// Executable bits but no #! line and no ELF header.
	junk := writeFile(t, dir, "junk", "\x00\x01\x02garbage", 0o755)
	tl = newTool(t, command.Definition{Name: "junk", Command: junk}, "")
	_, err = call(testCtx(t, 10*time.Second), t, tl, nil, nil)
	te = wantToolError(t, err, tools.KindInternal)
	if !strings.Contains(te.Message, "could not be started: not a program this system can run") {
		t.Fatalf("message %q", te.Message)
	}
}

// Calls leave no descriptors behind (goroutines are checked for the whole
// package by goleak in TestMain).
func TestNoDescriptorLeaks(t *testing.T) {
	tl := newTool(t, shDef(`echo out; echo err >&2; exit "$1"`, "0"), "")
	fail := newTool(t, shDef(`echo out; exit 1`), "")
	slowDef := shDef(`sleep 100`)
	slowDef.Timeout = 50 * time.Millisecond
	slow := newTool(t, slowDef, "")
	callText(t, tl, nil, nil) // warm up: the runtime's poller opens descriptors once
	before := countFDs(t)
	for range 10 {
		callText(t, tl, nil, nil)
		_, err := call(testCtx(t, 10*time.Second), t, fail, nil, nil)
		wantToolError(t, err, command.KindCommandFailed)
		_, err = call(testCtx(t, 10*time.Second), t, slow, nil, nil)
		wantToolError(t, err, tools.KindDeadlineExceeded)
	}
	if after := countFDs(t); after != before {
		t.Fatalf("%d open descriptors before, %d after", before, after)
	}
}

func countFDs(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(es)
}
