package codexagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"troupe/tools"
)

// How these tests know Codex's sandbox really is narrowed, on this
// machine: Codex 0.169 confines commands with bubblewrap and its
// codex-linux-sandbox helper, which works here as root (checked with
// `codex sandbox -c sandbox_mode="workspace-write" -- touch ...`: writes
// outside the workspace, /tmp and TMPDIR fail with "Read-only file
// system"). The helper is found through aliases Codex makes under
// CODEX_HOME, which it refuses to make when CODEX_HOME lies under the
// temporary directory; so Codex gets a TMPDIR of its own here (a
// sibling of CODEX_HOME, not its parent). Every command the scripted
// model asks for writes a file inside the workspace as well as one
// outside it: the inside file proves the command ran under a working
// sandbox, so the missing outside file is the sandbox's refusal and not a
// broken helper. Besides the outcome, the tests read what troupe sent
// from Codex's rollout (the turn_context line of each turn records the
// sandbox policy the turn ran with) and from troupe's log.

// surfaceEnv is a tools set over the scripted model with the given
// surface mode, config.toml lines and a log of the narrowings.
type surfaceEnv struct {
	s    *toolSet
	ts   []tools.Tool
	ws   string
	home string
	out  string // a directory workspace-write does not make writable
	log  *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// writeCodexHome writes a CODEX_HOME whose config.toml names the scripted
// model as provider, plus extra (top-level keys).
func writeCodexHome(t *testing.T, model *scriptedModel, extra string) string {
	t.Helper()
	home := t.TempDir()
	cfg := fmt.Sprintf(`%smodel = "scripted"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = %q
wire_api = "responses"
`, extra, model.srv.URL+"/v1")
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// sandboxEnv is the environment Codex runs with in these tests: its own
// TMPDIR, so it installs its sandbox helper (see above).
func sandboxEnv(t *testing.T, home string) map[string]string {
	return map[string]string{"PATH": os.Getenv("PATH"), "HOME": home, "CODEX_HOME": home, "LANG": "C.UTF-8",
		"TMPDIR": t.TempDir()}
}

// outsideDir is a fresh directory outside the workspace that Codex's
// workspace-write sandbox leaves read-only: not under /tmp nor the
// temporary directory (workspace-write makes both writable).
func outsideDir(t *testing.T) string {
	t.Helper()
	var bases []string
	if d, err := os.UserCacheDir(); err == nil {
		bases = append(bases, d)
	}
	bases = append(bases, "/var/tmp")
	for _, base := range bases {
		if under(base, "/tmp") || under(base, os.TempDir()) {
			continue
		}
		if err := os.MkdirAll(base, 0o755); err != nil {
			continue
		}
		d, err := os.MkdirTemp(base, "troupe-codex-sandbox-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	t.Skip("no directory outside /tmp and TMPDIR to test Codex's sandbox with")
	return ""
}

func under(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// writingModel asks, in every turn, for one command that makes
// inside-<n> in the workspace and escaped-<n> in out (n: the turn, from
// 1), then ends the turn once the command's output is back.
func writingModel(t *testing.T, out *string) *scriptedModel {
	return newScriptedModel(t, func(req modelRequest) map[string]any {
		turns := 0
		for _, it := range req.Input {
			if it["role"] == "user" {
				if c, _ := it["content"].([]any); len(c) > 0 {
					if m, _ := c[0].(map[string]any); m != nil && strings.HasPrefix(fmt.Sprint(m["text"]), "write ") {
						turns++
					}
				}
			}
		}
		if last := req.Input[len(req.Input)-1]; last["type"] == "function_call_output" {
			return modelMessage("done")
		}
		cmd := fmt.Sprintf("touch inside-%d; touch %s/escaped-%d; true", turns, *out, turns)
		args, _ := json.Marshal(map[string]any{"cmd": cmd})
		return map[string]any{"type": "function_call", "call_id": fmt.Sprintf("call_%d", turns), "name": "exec_command",
			"arguments": string(args)}
	})
}

func newSurfaceEnv(t *testing.T, surface bool, extra string) (*surfaceEnv, *scriptedModel) {
	t.Helper()
	bin := codexBinary(t)
	e := &surfaceEnv{log: &syncBuffer{}}
	model := writingModel(t, &e.out)
	e.out = outsideDir(t)
	e.home = writeCodexHome(t, model, extra)
	e.ws = t.TempDir()
	ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: e.ws, Timeout: 2 * time.Minute, Surface: surface,
		Env:    sandboxEnv(t, e.home),
		Logger: slog.New(slog.NewJSONHandler(e.log, &slog.HandlerOptions{Level: slog.LevelInfo}))}))
	if err != nil {
		t.Fatal(err)
	}
	e.ts, e.s = ts, ts[0].(*codexTool).s
	return e, model
}

// wrote reports which of turn n's files exist; the inside one must.
func (e *surfaceEnv) wrote(t *testing.T, n int) (escaped bool) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(e.ws, fmt.Sprintf("inside-%d", n))); err != nil {
		t.Fatalf("turn %d: the command did not write inside the workspace (is Codex's sandbox broken here?): %v\nlog: %s", n, err, e.log)
	}
	_, err := os.Stat(filepath.Join(e.out, fmt.Sprintf("escaped-%d", n)))
	return err == nil
}

// turnSandboxes lists the sandbox_policy type of every turn_context in
// the thread's rollout: what each turn ran with.
func turnSandboxes(t *testing.T, stateDir, threadID string) []string {
	t.Helper()
	var matches []string
	_ = filepath.WalkDir(stateDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, threadID+".jsonl") {
			matches = append(matches, path)
		}
		return nil
	})
	if len(matches) != 1 {
		t.Fatalf("rollout of %s: %v", threadID, matches)
	}
	f, err := os.Open(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Type    string `json:"type"`
			Payload struct {
				SandboxPolicy struct {
					Type string `json:"type"`
				} `json:"sandbox_policy"`
			} `json:"payload"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Type == "turn_context" {
			out = append(out, line.Payload.SandboxPolicy.Type)
		}
	}
	return out
}

func callTool(t *testing.T, tool tools.Tool, args map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(args)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := tool.Call(ctx, &tools.Request{Arguments: b})
	if err != nil {
		t.Fatal(err)
	}
	id, msg := structured(t, res)
	if msg != "done" {
		t.Fatalf("Codex answered %q", msg)
	}
	return id
}

// TestSurfaceNarrowsDangerFullAccess: a codex call asking for
// danger-full-access runs a command that writes outside the workspace.
// With the surface on Codex gets workspace-write and its sandbox refuses
// the write (and codex-reply's turn is confined the same way); off, the
// client gets what it asked for of Codex, and troupe's sandbox, in which
// Codex runs, still refuses the write.
func TestSurfaceNarrowsDangerFullAccess(t *testing.T) {
	for _, surface := range []bool{true, false} {
		t.Run(fmt.Sprintf("surface=%v", surface), func(t *testing.T) {
			e, _ := newSurfaceEnv(t, surface, "")
			id := callTool(t, e.ts[0], map[string]any{"prompt": "write 1", "sandbox": "danger-full-access",
				"approval-policy": "never"})
			if e.wrote(t, 1) {
				t.Fatalf("surface %v: the command wrote outside the workspace (troupe's sandbox holds in both modes)", surface)
			}
			callTool(t, e.ts[1], map[string]any{"threadId": id, "prompt": "write 2"})
			if e.wrote(t, 2) {
				t.Fatalf("surface %v, codex-reply: the command wrote outside the workspace (troupe's sandbox holds in both modes)", surface)
			}
			want := []string{"danger-full-access", "danger-full-access"}
			if surface {
				want = []string{"workspace-write", "workspace-write"}
			}
			if got := turnSandboxes(t, e.s.homes.root, id); !reflect.DeepEqual(got, want) {
				t.Errorf("the turns ran with %q, want %q", got, want)
			}
			logged := strings.Contains(e.log.String(), `"msg":"codex: sandbox narrowed"`)
			if logged != surface {
				t.Errorf("surface %v: narrowing logged = %v: %s", surface, logged, e.log)
			}
		})
	}
}

// TestSurfaceNarrowsConfiguredSandbox: nothing asked, but the user's
// config.toml says danger-full-access. Codex's thread/start and
// thread/resume answers say so, and with the surface on troupe asks for
// workspace-write on each turn/start; off, the configuration holds.
func TestSurfaceNarrowsConfiguredSandbox(t *testing.T) {
	for _, surface := range []bool{true, false} {
		t.Run(fmt.Sprintf("surface=%v", surface), func(t *testing.T) {
			e, _ := newSurfaceEnv(t, surface, "sandbox_mode = \"danger-full-access\"\napproval_policy = \"never\"\n")
			id := callTool(t, e.ts[0], map[string]any{"prompt": "write 1"})
			if e.wrote(t, 1) {
				t.Fatalf("surface %v: the command wrote outside the workspace (troupe's sandbox holds in both modes)", surface)
			}
			callTool(t, e.ts[1], map[string]any{"conversationId": id, "prompt": "write 2"})
			if e.wrote(t, 2) {
				t.Fatalf("surface %v, codex-reply: the command wrote outside the workspace (troupe's sandbox holds in both modes)", surface)
			}
			want := []string{"danger-full-access", "danger-full-access"}
			if surface {
				want = []string{"workspace-write", "workspace-write"}
			}
			if got := turnSandboxes(t, e.s.homes.root, id); !reflect.DeepEqual(got, want) {
				t.Errorf("the turns ran with %q, want %q", got, want)
			}
			// The narrowing was troupe's turn/start, from the thread's
			// sandbox (the request asked for none).
			n := strings.Count(e.log.String(), `"from":"the thread's sandbox"`)
			if surface && n != 2 || !surface && n != 0 {
				t.Errorf("surface %v: %d narrowings of the thread's sandbox logged: %s", surface, n, e.log)
			}
		})
	}
}

// TestSurfaceSpecs: the same names, titles, schemas and annotations in
// both modes; troupe's gate (RequiresApproval, HighRisk) only with the
// surface on. The management methods' params are the same too.
func TestSurfaceSpecs(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	specs := func(surface bool) (map[string]tools.Spec, map[string]tools.Spec) {
		opts := testOptions(t, Options{Binary: bin, Workspace: t.TempDir(), Surface: surface})
		ts, err := Tools(opts)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := Methods(opts, MethodOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a, b := map[string]tools.Spec{}, map[string]tools.Spec{}
		for _, x := range ts {
			a[x.Spec().Name] = x.Spec()
		}
		for _, x := range ms {
			b[x.Spec().Name] = x.Spec()
		}
		return a, b
	}
	onTools, onMethods := specs(true)
	offTools, offMethods := specs(false)
	if len(onTools) != 2 || len(onTools) != len(offTools) || len(onMethods) != len(offMethods) || len(onMethods) == 0 {
		t.Fatalf("tools %d/%d, methods %d/%d", len(onTools), len(offTools), len(onMethods), len(offMethods))
	}
	for name, on := range onTools {
		off, ok := offTools[name]
		if !ok {
			t.Fatalf("%s is missing with the surface off", name)
		}
		if on.Title != off.Title || !bytes.Equal(on.InputSchema, off.InputSchema) || !bytes.Equal(on.OutputSchema, off.OutputSchema) ||
			!reflect.DeepEqual(on.Annotations, off.Annotations) {
			t.Errorf("%s differs between the modes beyond its gate and description", name)
		}
		if !on.Safety.RequiresApproval || !on.Safety.HighRisk {
			t.Errorf("%s with the surface on: safety %+v, want approval and high risk", name, on.Safety)
		}
		if off.Safety.RequiresApproval || off.Safety.HighRisk {
			t.Errorf("%s with the surface off: safety %+v, want no troupe gate", name, off.Safety)
		}
		if !strings.Contains(on.Description, "workspace-write") || !strings.Contains(on.Description, "needs a person's approval") ||
			strings.Contains(off.Description, "needs a person's approval") {
			t.Errorf("%s descriptions: on %q, off %q", name, on.Description, off.Description)
		}
	}
	for name, on := range onMethods {
		off, ok := offMethods[name]
		if !ok {
			t.Fatalf("method %s is missing with the surface off", name)
		}
		if !bytes.Equal(on.InputSchema, off.InputSchema) || on.Safety.RequiresApproval != off.Safety.RequiresApproval {
			t.Errorf("method %s differs between the modes", name)
		}
	}
}

// TestConfine checks the one function's rules without Codex.
func TestConfine(t *testing.T) {
	bin, _ := os.Executable()
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(surface bool) *toolSet {
		ts, err := Tools(testOptions(t, Options{Binary: bin, Workspace: ws, Surface: surface}))
		if err != nil {
			t.Fatal(err)
		}
		return ts[0].(*codexTool).s
	}
	on, off := mk(true), mk(false)
	wsReal := on.wsReal
	danger := map[string]any{"type": "dangerFullAccess"}
	for _, tc := range []struct {
		name      string
		method    string
		params    map[string]any
		effective map[string]any
		want      map[string]any // params after confine, surface on
	}{
		{"start danger", "thread/start", map[string]any{"sandbox": "danger-full-access"}, nil,
			map[string]any{"sandbox": "workspace-write"}},
		{"resume danger", "thread/resume", map[string]any{"threadId": "x", "sandbox": "danger-full-access"}, nil,
			map[string]any{"threadId": "x", "sandbox": "workspace-write"}},
		{"start read-only", "thread/start", map[string]any{"sandbox": "read-only"}, nil,
			map[string]any{"sandbox": "read-only"}},
		{"start nothing", "thread/start", map[string]any{}, nil, map[string]any{}},
		{"turn asked danger", "turn/start", map[string]any{"sandboxPolicy": danger}, nil,
			map[string]any{"sandboxPolicy": workspaceWrite()}},
		{"turn asked external", "turn/start", map[string]any{"sandboxPolicy": map[string]any{"type": "externalSandbox", "networkAccess": "enabled"}}, nil,
			map[string]any{"sandboxPolicy": workspaceWrite()}},
		{"turn nothing, thread danger", "turn/start", map[string]any{}, danger,
			map[string]any{"sandboxPolicy": workspaceWrite()}},
		{"turn nothing, thread read-only", "turn/start", map[string]any{}, map[string]any{"type": "readOnly"},
			map[string]any{}},
		{"turn nothing, thread unknown", "turn/start", map[string]any{}, nil, map[string]any{}},
		{"turn asked roots", "turn/start", map[string]any{"sandboxPolicy": map[string]any{"type": "workspaceWrite",
			"writableRoots": []string{filepath.Join(wsReal, "sub"), "/"}, "networkAccess": true}}, nil,
			map[string]any{"sandboxPolicy": map[string]any{"type": "workspaceWrite",
				"writableRoots": []any{filepath.Join(wsReal, "sub")}, "networkAccess": true}}},
		{"turn nothing, thread roots outside", "turn/start", map[string]any{},
			map[string]any{"type": "workspaceWrite", "writableRoots": []any{"/etc"}, "networkAccess": false},
			map[string]any{"sandboxPolicy": map[string]any{"type": "workspaceWrite", "writableRoots": []any{}, "networkAccess": false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clone := func(m map[string]any) map[string]any {
				b, _ := json.Marshal(m)
				var out map[string]any
				_ = json.Unmarshal(b, &out)
				return out
			}
			p := clone(tc.params)
			on.confine("codex", tc.method, p, tc.effective)
			if !reflect.DeepEqual(clone(p), clone(tc.want)) {
				t.Errorf("surface on: %v became %v, want %v", tc.params, p, tc.want)
			}
			p = clone(tc.params)
			off.confine("codex", tc.method, p, tc.effective)
			if !reflect.DeepEqual(p, clone(tc.params)) {
				t.Errorf("surface off: %v became %v", tc.params, p)
			}
		})
	}
}

// countNotes is how many notifications named method the session got.
func (s *methSession) countNotes(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, x := range s.notes {
		if x.method == method {
			n++
		}
	}
	return n
}

// waitCount waits until the session got n notifications named method.
func (s *methSession) waitCount(t *testing.T, method string, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); s.countNotes(method) < n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s notifications within a minute: %q", s.countNotes(method), n, method, s.methods())
		}
	}
}

// TestSurfaceMethods: the management methods are confined the same way.
// newConversation's sandbox danger-full-access (then sendUserMessage,
// which asks for none), sendUserTurn's sandboxPolicy {"mode":
// "danger-full-access"}, and a config.toml saying danger-full-access
// with nothing asked all end in workspace-write turns whose writes
// outside the workspace fail; with the surface off the first two write.
func TestSurfaceMethods(t *testing.T) {
	for _, tc := range []struct {
		name    string
		surface bool
		config  string
		newConv map[string]any
	}{
		{"surface=true", true, "", map[string]any{"sandbox": "danger-full-access", "approvalPolicy": "never"}},
		{"surface=false", false, "", map[string]any{"sandbox": "danger-full-access", "approvalPolicy": "never"}},
		{"surface=true, configured", true, "sandbox_mode = \"danger-full-access\"\napproval_policy = \"never\"\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			logs := &syncBuffer{}
			model := writingModel(t, &out)
			out = outsideDir(t)
			e := methSetupWith(t, model, MethodOptions{}, tc.config, func(o *Options) {
				o.Surface = tc.surface
				o.Env = sandboxEnv(t, o.Env["CODEX_HOME"])
				o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
			})
			escaped := func(n int) bool {
				t.Helper()
				if _, err := os.Stat(filepath.Join(e.ws, fmt.Sprintf("inside-%d", n))); err != nil {
					t.Fatalf("turn %d did not write inside the workspace: %v\nlog: %s", n, err, logs)
				}
				_, err := os.Stat(filepath.Join(out, fmt.Sprintf("escaped-%d", n)))
				return err == nil
			}
			s := &methSession{id: "s1"}
			nc := e.must(t, s, "newConversation", tc.newConv)
			id := nc["conversationId"].(string)
			e.must(t, s, "addConversationListener", map[string]any{"conversationId": id})
			e.must(t, s, "sendUserMessage", map[string]any{"conversationId": id,
				"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "write 1"}}}})
			s.waitCount(t, "codex/event/task_complete", 1)
			if escaped(1) {
				t.Fatalf("sendUserMessage: wrote outside the workspace (troupe's sandbox holds in both modes)")
			}
			e.must(t, s, "sendUserTurn", map[string]any{"conversationId": id,
				"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "write 2"}}},
				"cwd":   e.ws, "approvalPolicy": "never", "sandboxPolicy": map[string]any{"mode": "danger-full-access"},
				"model": "scripted", "summary": "auto"})
			s.waitCount(t, "codex/event/task_complete", 2)
			if escaped(2) {
				t.Fatalf("sendUserTurn: wrote outside the workspace (troupe's sandbox holds in both modes)")
			}
			// resumeConversation, by another session once the first ended,
			// asking for danger-full-access in its overrides.
			for _, tl := range e.tools {
				tl.(tools.SessionEnder).SessionEnded("s1")
			}
			e.tools["newConversation"].(tools.SessionWaiter).Wait()
			s2 := &methSession{id: "s2"}
			e.must(t, s2, "resumeConversation", map[string]any{"path": nc["rolloutPath"],
				"overrides": map[string]any{"sandbox": "danger-full-access", "approvalPolicy": "never"}})
			e.must(t, s2, "addConversationListener", map[string]any{"conversationId": id})
			e.must(t, s2, "sendUserMessage", map[string]any{"conversationId": id,
				"items": []any{map[string]any{"type": "text", "data": map[string]any{"text": "write 3"}}}})
			s2.waitCount(t, "codex/event/task_complete", 1)
			if escaped(3) {
				t.Fatalf("after resumeConversation: wrote outside the workspace (troupe's sandbox holds in both modes)")
			}
			want := []string{"danger-full-access", "danger-full-access", "danger-full-access"}
			if tc.surface {
				want = []string{"workspace-write", "workspace-write", "workspace-write"}
			}
			if got := turnSandboxes(t, e.ms.s.homes.root, id); !reflect.DeepEqual(got, want) {
				t.Errorf("the turns ran with %q, want %q", got, want)
			}
			if logged := strings.Contains(logs.String(), "sandbox narrowed"); logged != tc.surface {
				t.Errorf("narrowing logged = %v: %s", logged, logs)
			}
		})
	}
}

// TestCodexSandboxHoldsInsideTroupes: Codex runs in troupe's sandbox,
// and its own sandbox still works inside: a read-only thread's command
// cannot write in the workspace (which troupe's sandbox would allow), a
// workspace-write thread's can; and a command the model asks to run
// outside Codex's sandbox (an escalation), approved by the client, runs
// without Codex's sandbox but still inside troupe's: it writes in the
// workspace and not outside.
func TestCodexSandboxHoldsInsideTroupes(t *testing.T) {
	out := outsideDir(t)
	model := newScriptedModel(t, func(req modelRequest) map[string]any {
		for _, it := range req.Input {
			if it["type"] == "function_call_output" {
				return modelMessage("done")
			}
		}
		texts := req.texts()
		args := map[string]any{"cmd": fmt.Sprintf("touch plain-file; touch %s/plain-escaped; true", out)}
		if len(texts) > 0 && strings.Contains(texts[len(texts)-1], "run-escalated") {
			args = map[string]any{"cmd": fmt.Sprintf("touch escalated-file; touch %s/escalated-escaped; true", out),
				"sandbox_permissions": "require_escalated", "justification": "the test asks for it"}
		}
		b, _ := json.Marshal(args)
		return map[string]any{"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": string(b)}
	})
	home := writeCodexHome(t, model, "")
	ws := t.TempDir()
	ts, err := Tools(testOptions(t, Options{Binary: codexBinary(t), Workspace: ws, Timeout: 2 * time.Minute,
		Surface: true, Env: sandboxEnv(t, home)}))
	if err != nil {
		t.Fatal(err)
	}
	run := func(prompt, sandbox, policy string, client tools.Client) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"prompt": prompt, "sandbox": sandbox, "approval-policy": policy})
		if _, err := ts[0].Call(context.Background(), &tools.Request{Arguments: b, Reporter: &recorder{}, Client: client,
			Session: &fakeSession{}, RequestID: json.RawMessage(`"r1"`)}); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	run("plain", "read-only", "never", nil)
	if exists(filepath.Join(ws, "plain-file")) || exists(filepath.Join(out, "plain-escaped")) {
		t.Fatal("a read-only thread's command wrote: Codex's own sandbox does not hold inside troupe's")
	}
	run("plain", "workspace-write", "never", nil)
	if !exists(filepath.Join(ws, "plain-file")) {
		b, _ := json.Marshal(model.last().Input)
		t.Fatalf("a workspace-write thread's command could not write in the workspace: Codex's sandbox does not work inside troupe's; the model saw %s", lastN(string(b), 1500))
	}
	if exists(filepath.Join(out, "plain-escaped")) {
		t.Fatal("a workspace-write thread's command wrote outside the workspace")
	}
	client := &approver{decision: "accept"}
	run("run-escalated", "read-only", "on-request", client)
	if len(client.asked) != 1 {
		t.Fatalf("the escalation was not asked of the client: %q", client.asked)
	}
	if !exists(filepath.Join(ws, "escalated-file")) {
		t.Fatal("the approved escalated command did not run (or not outside Codex's read-only sandbox)")
	}
	if exists(filepath.Join(out, "escalated-escaped")) {
		t.Fatal("an escalated command wrote outside the workspace: it ran outside troupe's sandbox")
	}
}

// lastN is the end of s, at most n bytes.
func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
