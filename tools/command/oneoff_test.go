package command_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"troupe/sandbox"
	"troupe/spool"
	"troupe/tools"
	"troupe/tools/command"
)

// TestOneOffAnswersInTheOldShapeAndStaysConfined: execOneOffCommand takes
// Codex's former params, answers {exitCode, stdout, stderr}, needs a
// person's approval, and runs under troupe's profile even when the client
// asks for danger-full-access.
func TestOneOffAnswersInTheOldShapeAndStaysConfined(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	tl, err := command.OneOff(command.ShellOptions{Workspace: ws, Sandbox: testSandbox(t), KillGrace: 300 * time.Millisecond,
		Limits: sandbox.Limits{MaxProcesses: 64}})
	if err != nil {
		t.Fatal(err)
	}
	if spec := tl.Spec(); spec.Name != "execOneOffCommand" || !spec.Safety.HighRisk || !spec.Safety.NeedsApproval() {
		t.Fatalf("spec: %+v", spec)
	}
	real, _ := filepath.EvalSymlinks(ws)
	run := func(params map[string]any) map[string]any {
		t.Helper()
		res, err := call(testCtx(t, 30*time.Second), t, tl, params, &tools.Request{Output: spool.NewOutput(spool.Limits{})})
		if err != nil {
			t.Fatalf("%v: %v", params, err)
		}
		var out map[string]any
		b, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := run(map[string]any{"command": []string{"sh", "-c", "pwd; echo err >&2; exit 2"}, "timeoutMs": nil, "cwd": real})
	if len(got) != 3 || got["exitCode"] != float64(2) || got["stdout"] != real+"\n" || got["stderr"] != "err\n" {
		t.Fatalf("result: %v", got)
	}
	marker := filepath.Join(outside, "owned")
	got = run(map[string]any{"command": []string{"sh", "-c", "echo x > " + marker},
		"sandboxPolicy": map[string]any{"type": "danger-full-access"}})
	if got["exitCode"] == float64(0) {
		t.Fatalf("danger-full-access escaped troupe's sandbox: %v", got)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command wrote outside the workspace")
	}
	if _, err := call(testCtx(t, 10*time.Second), t, tl, map[string]any{"command": []string{"sh"}, "cwd": outside}, nil); err == nil {
		t.Fatal("a cwd outside the workspace was accepted")
	}
}
