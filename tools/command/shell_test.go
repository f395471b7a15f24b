package command_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
	"troupe/tools/command"
)

// testSandbox is a process sandbox for the tests, the test binary being
// its helper.
func testSandbox(t *testing.T) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// No skipping: an escape test that does not run cannot fail.
	if err := sb.Check(sandbox.Policy{Profile: sandbox.ProfileDefault, Workspace: t.TempDir()}); err != nil {
		t.Fatalf("the default profile cannot be enforced here: %v", err)
	}
	return sb
}

func shellTool(t *testing.T, ws string, profile string) tools.Tool {
	t.Helper()
	opts := command.ShellOptions{Workspace: ws, SandboxProfile: profile, KillGrace: 300 * time.Millisecond,
		Limits: sandbox.Limits{MaxProcesses: 64}}
	if profile != "none" {
		opts.Sandbox = testSandbox(t)
	}
	tl, err := command.Shell(opts)
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

type shellResult struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	TimedOut   bool   `json:"timed_out"`
	DurationMs int64  `json:"duration_ms"`
	hint       string // the result's sandbox hint, if any
}

func runShell(t *testing.T, tl tools.Tool, args map[string]any) shellResult {
	t.Helper()
	res, err := call(testCtx(t, 30*time.Second), t, tl, args, &tools.Request{Output: spool.NewOutput(spool.Limits{})})
	if err != nil {
		t.Fatalf("shell.exec %v: %v", args, err)
	}
	var r shellResult
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	r.hint, _ = res.Meta[tools.MetaSandboxHint].(string)
	return r
}

func TestShellRunsAnArgv(t *testing.T) {
	ws := t.TempDir()
	os.Mkdir(filepath.Join(ws, "sub"), 0o755)
	tl := shellTool(t, ws, "default")
	spec := tl.Spec()
	if !spec.Safety.HighRisk || !spec.Safety.NeedsApproval() || *spec.Annotations.ReadOnlyHint || !*spec.Annotations.DestructiveHint {
		t.Fatalf("shell.exec is not marked high-risk and destructive: %+v", spec)
	}
	r := runShell(t, tl, map[string]any{"command": []string{"sh", "-c", `pwd; echo "$GREETING"; echo oops >&2; exit 3`},
		"cwd": "sub", "env": map[string]string{"GREETING": "hi"}})
	real, _ := filepath.EvalSymlinks(ws)
	if r.ExitCode != 3 || r.Stdout != filepath.Join(real, "sub")+"\nhi\n" || r.Stderr != "oops\n" || r.TimedOut || r.Truncated {
		t.Fatalf("result %+v", r)
	}
	for _, bad := range []map[string]any{
		{"command": []string{"sh"}, "cwd": "../.."},
		{"command": []string{"./relative/prog"}},
		{"command": []string{""}},
		{"command": []string{"sh"}, "env": map[string]string{"A=B": "c"}},
	} {
		if _, err := call(testCtx(t, 10*time.Second), t, tl, bad, nil); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

// Each escape must fail under the default profile and succeed with none.
func TestShellSandboxEscapes(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("secret-service\n"))
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	escapes := []struct{ name, script string }{
		{"write outside the workspace", fmt.Sprintf("echo x > %s/owned", outside)},
		{"write through a symlink", "echo x > link/via-link"},
		{"tcp to a loopback service", fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d && head -1 <&3 | grep -q secret-service", port)},
		{"udp egress", fmt.Sprintf("echo x > /dev/udp/127.0.0.1/%d", port)},
	}
	for _, profile := range []string{"default", "none"} {
		tl := shellTool(t, ws, profile)
		for _, e := range escapes {
			r := runShell(t, tl, map[string]any{"command": []string{"bash", "-c", e.script}})
			if allowed := r.ExitCode == 0; allowed != (profile == "none") {
				t.Errorf("profile %s: %s: exit %d, stderr %q", profile, e.name, r.ExitCode, r.Stderr)
			}
			if profile == "default" && r.ExitCode != 0 && r.hint == "" {
				t.Errorf("%s: refused without a sandbox hint (stderr %q)", e.name, r.Stderr)
			}
		}
		// Writing inside the workspace and the private temp dir works.
		if r := runShell(t, tl, map[string]any{"command": []string{"sh", "-c", `echo ok > inside && echo t > "${TMPDIR:-/tmp}/t"`}}); r.ExitCode != 0 {
			t.Errorf("profile %s: writing inside: %+v", profile, r)
		}
	}
}

// A tree that ignores SIGTERM is gone, grandchildren included, once the
// call's context ends; the measured latency is in BenchmarkShellCancel.
func TestShellCancelKillsTheTree(t *testing.T) {
	ws := t.TempDir()
	tl := shellTool(t, ws, "default")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, t, tl, map[string]any{"command": []string{"bash", "-c",
			`trap '' TERM; (trap '' TERM; sleep 300) & (trap '' TERM; sleep 300) & echo $$ $! > pids; wait`}},
			&tools.Request{Output: spool.NewOutput(spool.Limits{})})
		done <- err
	}()
	var pids []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(ws, "pids"))
		if pids = strings.Fields(string(b)); len(pids) == 2 {
			break
		}
	}
	if len(pids) != 2 {
		t.Fatal("the program did not start")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not return after cancellation")
	}
	for _, p := range pids {
		if _, err := os.Stat("/proc/" + p); err == nil {
			if b, _ := os.ReadFile("/proc/" + p + "/stat"); !strings.Contains(string(b), ") Z ") {
				t.Errorf("process %s survived the cancellation", p)
			}
		}
	}
}

// Output beyond the inline head and tail is spooled, not lost.
func TestShellOutputIsSpooled(t *testing.T) {
	ws := t.TempDir()
	tl := shellTool(t, ws, "none")
	store := spool.NewStore(t.TempDir(), spool.Limits{InlineBytes: 1024})
	defer store.Close()
	out, _ := store.Create("c1")
	res, err := call(testCtx(t, 30*time.Second), t, tl, map[string]any{"command": []string{"seq", "100000"}},
		&tools.Request{Output: out})
	if err != nil {
		t.Fatal(err)
	}
	out.Close()
	var r shellResult
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &r)
	if !r.Truncated || !strings.HasPrefix(r.Stdout, "[stdout: 588895 bytes;") || !strings.Contains(r.Stdout, "]\n1\n2\n") || !strings.HasSuffix(r.Stdout, "99999\n100000\n") ||
		!strings.Contains(r.Stdout, "troupe://output/c1/stdout") {
		t.Fatalf("stdout %q", r.Stdout)
	}
	if *out.ExitStatus() != 0 || out.Stdout.Spooled() != out.Stdout.Total() {
		t.Fatalf("exit %v, spooled %d of %d", out.ExitStatus(), out.Stdout.Spooled(), out.Stdout.Total())
	}
	_ = protocol.MetaPrefix
}

func BenchmarkShellCancel(b *testing.B) {
	ws := b.TempDir()
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	tl, err := command.Shell(command.ShellOptions{Workspace: ws, Sandbox: sb, KillGrace: 200 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			call(ctx, b, tl, map[string]any{"command": []string{"bash", "-c", `trap '' TERM; sleep 300 & echo go > started; wait`}},
				&tools.Request{Output: spool.NewOutput(spool.Limits{})})
			close(done)
		}()
		for {
			if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		os.Remove(filepath.Join(ws, "started"))
		start := time.Now()
		cancel()
		<-done
		total += time.Since(start)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "cancel-to-dead-µs")
}
