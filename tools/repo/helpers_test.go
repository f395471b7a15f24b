package repo_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"troupe/sandbox"
	"troupe/tools"
	"troupe/tools/repo"
	"troupe/tools/tooltest"
	"troupe/workspace"
)

// fixture is a file tree for a test. Keys are slash paths; a value
// starting with "->" makes a symlink to the rest, a key ending in "/" an
// empty directory, anything else a file with that content.
type fixture map[string]string

// build writes the tree under a fresh temporary directory and opens it as a
// workspace, closed when the test ends.
func (fx fixture) build(t testing.TB) (*workspace.Root, string) {
	t.Helper()
	dir := t.TempDir()
	fx.write(t, dir)
	ws, err := workspace.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, dir
}

// write creates the tree under dir.
func (fx fixture) write(t testing.TB, dir string) {
	t.Helper()
	tooltest.WriteTree(t, dir, fx)
}

// toolSet is the three tools behind a registry, called the way troupe
// calls them: Validate, then Call.
type toolSet struct {
	t   testing.TB
	reg *tools.Registry
}

func newToolSet(t testing.TB, ws *workspace.Root, opts repo.Options) *toolSet {
	t.Helper()
	if opts.Sandbox == nil && !opts.DisableRipgrep {
		// rg only runs confined.
		opts.Sandbox = newSandbox(t)
	}
	if opts.Logger == nil {
		// Where the kernel has Landlock, rg must run confined: a silent
		// fallback to the built-in search would make every rg test,
		// parity included, compare the built-in search with itself.
		abi, _ := llsys.LandlockGetABIVersion()
		opts.Logger = slog.New(warnHandler{t: t, fail: abi > 0})
	}
	reg, err := tools.NewRegistry(repo.Tools(ws, opts)...)
	if err != nil {
		t.Fatal(err)
	}
	return &toolSet{t: t, reg: reg}
}

// call runs a tool with args (any JSON-marshalable value) and decodes its
// structured result into out. It returns the tool's error, checking that
// a success carries the same JSON as text and structuredContent.
func (ts *toolSet) call(ctx context.Context, name string, args any, out any) error {
	ts.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		ts.t.Fatal(err)
	}
	e, ok := ts.reg.Lookup(name)
	if !ok {
		ts.t.Fatalf("no tool %s", name)
	}
	valid, err := e.Validate(raw)
	if err != nil {
		return err
	}
	res, err := e.Tool.Call(ctx, &tools.Request{Arguments: valid})
	if err != nil {
		return err
	}
	sc, ok := res.StructuredContent.(json.RawMessage)
	if !ok {
		ts.t.Fatalf("%s: structuredContent is %T", name, res.StructuredContent)
	}
	if len(res.Content) != 1 || res.Content[0].Text != string(sc) {
		ts.t.Fatalf("%s: text content %+v differs from structuredContent %s", name, res.Content, sc)
	}
	if out != nil {
		if err := json.Unmarshal(sc, out); err != nil {
			ts.t.Fatalf("%s: %v in %s", name, err, sc)
		}
	}
	return nil
}

// wantToolError checks that err is a *tools.Error of the kind, whose
// message names no host path.
func wantToolError(t testing.TB, err error, kind tools.Kind, hostDirs ...string) *tools.Error {
	t.Helper()
	te := tooltest.WantError(t, err, kind)
	for _, d := range hostDirs {
		if d != "" && strings.Contains(te.Message, d) {
			t.Fatalf("message %q reveals host path %q", te.Message, d)
		}
	}
	return te
}

// Result shapes, as a client decodes them.
type (
	listResult struct {
		Entries []struct {
			Name      string `json:"name"`
			Type      string `json:"type"`
			SizeBytes *int64 `json:"sizeBytes"`
		} `json:"entries"`
		Truncated bool `json:"truncated"`
	}
	readResult struct {
		Path      string `json:"path"`
		Content   string `json:"content"`
		Truncated bool   `json:"truncated"`
	}
	grepMatch struct {
		FilePath   string `json:"filePath"`
		LineNumber int64  `json:"lineNumber"`
		LineText   string `json:"lineText"`
	}
	grepResult struct {
		Matches   []grepMatch `json:"matches"`
		Truncated bool        `json:"truncated"`
	}
)

// testCtx is a context that ends before the test's own deadline, so a
// hanging call fails the test instead of the whole binary.
func testCtx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newSandbox is a sandbox for the rg runs of one test, logging into the
// test log.
func newSandbox(t testing.TB) *sandbox.Sandbox {
	t.Helper()
	sb, err := sandbox.New(sandbox.Options{Helper: sandboxHelper(t), Logger: slog.New(slog.NewTextHandler(tlog{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// The probe runs helpers in the background; tests that look for
	// processes left behind must not find them.
	_ = sb.Isolation()
	return sb
}

// tlog writes log lines into the test log.
type tlog struct{ t testing.TB }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// warnHandler fails the test on a warning (the repo tools warn only when
// rg cannot be confined) when fail is set, and logs it otherwise.
type warnHandler struct {
	t     testing.TB
	fail  bool
	attrs []slog.Attr
}

func (h warnHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h warnHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := append([]slog.Attr(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	if h.fail {
		h.t.Errorf("warning: %s %v", r.Message, attrs)
	} else {
		h.t.Logf("warning: %s %v", r.Message, attrs)
	}
	return nil
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return h
}

func (h warnHandler) WithGroup(string) slog.Handler { return h }
