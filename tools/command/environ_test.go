package command_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/command"
)

// The program sees the baseline, then the tool's env, then the session's,
// and nothing else of the server's environment.
func TestEnvironmentLayers(t *testing.T) {
	t.Setenv("TROUPE_TEST_SERVER_SECRET", "must not leak")
	t.Setenv("TERM", "xterm-256color")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("HOME", "/home/troupe-test")

	def := helperDef(t, nil, "")
	def.Env["A"] = "tool"
	def.Env["B"] = "tool"
	def.Env["EMPTY"] = ""
	tl := newTool(t, def, "")
	s := callSeen(t, tl, nil, &tools.Request{Overrides: &tools.Overrides{Env: map[string]string{"A": "session", "C": "session"}}})

	env := map[string]string{}
	for _, kv := range s.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	want := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": "/home/troupe-test", "LANG": "C.UTF-8", "TMPDIR": os.TempDir(),
		"TERM": "dumb", "A": "session", "B": "tool", "C": "session", "EMPTY": "",
		"COMMAND_TEST_HELPER": "1", "GORACE": "atexit_sleep_ms=0",
	}
	for k, v := range want {
		if got, ok := env[k]; !ok || got != v {
			t.Errorf("%s=%q (set: %v), want %q", k, got, ok, v)
		}
	}
	for k := range env {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected variable %s=%q reached the program", k, env[k])
		}
	}
}

// A bare command is looked up on the PATH of the call's environment, so
// a session can point it elsewhere.
func TestCommandFollowsTheSessionPATH(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	// A symlink, not a script: writing an executable while other tests
	// fork risks ETXTBSY.
	if err := os.Symlink("/bin/echo", filepath.Join(bin, "troupe-test-echo")); err != nil {
		t.Fatal(err)
	}
	def := command.Definition{Name: "e", Command: "troupe-test-echo", Args: []string{"found"},
		Env: map[string]string{"PATH": bin}}
	tl := newTool(t, def, "")
	if out := callText(t, tl, nil, nil); out != "found\n" {
		t.Fatalf("output %q", out)
	}
	// The session's PATH has no such program: internal, naming the command.
	_, err := call(testCtx(t, 10*time.Second), t, tl, nil,
		&tools.Request{Overrides: &tools.Overrides{Env: map[string]string{"PATH": "/nonexistent"}}})
	te := wantToolError(t, err, tools.KindInternal)
	if !strings.Contains(te.Message, `"troupe-test-echo" cannot be run: not found on PATH`) {
		t.Fatalf("message %q", te.Message)
	}
	// A session variable the kernel cannot pass.
	_, err = call(testCtx(t, 10*time.Second), t, tl, nil,
		&tools.Request{Overrides: &tools.Overrides{Env: map[string]string{"A=B": "x"}}})
	wantToolError(t, err, tools.KindInvalidArgument)
}

// Secret-looking values of the tool's and the session's env never reach
// the client, whichever way the program prints them.
func TestSecretsAreRedacted(t *testing.T) {
	t.Parallel()
	def := shDef(`echo "token=$API_TOKEN pw=$DB_PASSWORD plain=$PLAIN short=$SHORT_TOKEN"; echo "$API_TOKEN" >&2; exit "$1"`, "0")
	def.Env = map[string]string{"API_TOKEN": "tok-1234567890", "PLAIN": "visible-value", "SHORT_TOKEN": "abc"}
	def.Streaming = true
	tl := newTool(t, def, "")
	rec := &recorder{}
	over := &tools.Overrides{Env: map[string]string{"DB_PASSWORD": "hunter2hunter2"}}
	out := callText(t, tl, nil, &tools.Request{Overrides: over, Reporter: rec, WantsProgress: true})
	if want := "token=[redacted] pw=[redacted] plain=visible-value short=abc\n"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	for _, l := range rec.logs {
		if strings.Contains(l.data["text"].(string), "tok-1234567890") {
			t.Fatalf("streamed log %v leaks the token", l.data)
		}
	}

	def.Args[len(def.Args)-1] = "1"
	tl = newTool(t, def, "")
	_, err := call(testCtx(t, 10*time.Second), t, tl, nil, &tools.Request{Overrides: over})
	wantToolError(t, err, command.KindCommandFailed, "tok-1234567890", "hunter2hunter2")
}

// The working directory: the session's, else the configured one, else the
// workspace root; always inside the workspace, symlinks resolved.
func TestWorkingDirectory(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	real := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{"ws/sub", "ws/other", "outside"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, real, "file.txt", "x", 0o644)
	must(t, os.Symlink(outside, filepath.Join(real, "link-out")))
	must(t, os.Symlink("sub", filepath.Join(real, "link-in")))
	// The workspace is configured through a symlink of its own.
	wsLink := filepath.Join(base, "ws-link")
	must(t, os.Symlink(real, wsLink))

	def := helperDef(t, nil, "")
	def.Cwd = "sub"
	tl := newTool(t, def, wsLink)
	plain := newTool(t, helperDef(t, nil, ""), wsLink)

	cwd := func(tl tools.Tool, session string) string {
		return callSeen(t, tl, nil, &tools.Request{Overrides: &tools.Overrides{Cwd: session}}).Cwd
	}
	for _, c := range []struct {
		tool    tools.Tool
		session string
		want    string
	}{
		{plain, "", real},
		{tl, "", filepath.Join(real, "sub")},
		{tl, "other", filepath.Join(real, "other")},
		{tl, ".", real},
		{tl, "link-in", filepath.Join(real, "sub")},
		{tl, filepath.Join(wsLink, "other"), filepath.Join(real, "other")},
		{tl, filepath.Join(real, "other"), filepath.Join(real, "other")},
		{tl, "sub/../other", filepath.Join(real, "other")},
	} {
		if got := cwd(c.tool, c.session); got != c.want {
			t.Errorf("session cwd %q: ran in %s, want %s", c.session, got, c.want)
		}
	}

	for _, c := range []struct {
		session string
		kind    tools.Kind
	}{
		{"..", tools.KindPermissionDenied},
		{"../outside", tools.KindPermissionDenied},
		{"sub/../../outside", tools.KindPermissionDenied},
		{outside, tools.KindPermissionDenied},
		{"/", tools.KindPermissionDenied},
		{"link-out", tools.KindPermissionDenied},
		{"missing", tools.KindNotFound},
		{"file.txt", tools.KindNotFound},
	} {
		_, err := call(testCtx(t, 10*time.Second), t, tl, nil, &tools.Request{Overrides: &tools.Overrides{Cwd: c.session}})
		hidden := base // the host path the session's relative path resolves to
		if filepath.IsAbs(c.session) {
			hidden = "" // quoting the session's own path is fine
		}
		te := wantToolError(t, err, c.kind, hidden)
		if !strings.Contains(te.Message, "(set by the session)") {
			t.Errorf("message %q does not say where the directory came from", te.Message)
		}
	}

	// A configured directory removed after New fails the call, not New.
	gone := helperDef(t, nil, "")
	gone.Cwd = "later"
	must(t, os.Mkdir(filepath.Join(real, "later"), 0o755))
	goneTool := newTool(t, gone, real)
	must(t, os.Remove(filepath.Join(real, "later")))
	_, err := call(testCtx(t, 10*time.Second), t, goneTool, nil, nil)
	te := wantToolError(t, err, tools.KindNotFound, base)
	if !strings.Contains(te.Message, `"later" (configured)`) {
		t.Errorf("message %q", te.Message)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
