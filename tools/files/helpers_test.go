package files_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/files"
	"troupe/tools/tooltest"
	"troupe/workspace"
)

// fixture is a file tree for a test. Keys are slash paths; a value
// starting with "->" makes a symlink to the rest, a key ending in "/" an
// empty directory, anything else a file with that content.
type fixture map[string]string

// write creates the tree under dir.
func (fx fixture) write(t testing.TB, dir string) {
	t.Helper()
	tooltest.WriteTree(t, dir, fx)
}

// env is a test's world: a base directory holding the workspace "ws" and
// a directory "outside" beside it, and the tools behind a registry.
type env struct {
	t       testing.TB
	base    string // holds ws and outside
	dir     string // the workspace
	outside string
	ws      *workspace.Root
	reg     *tools.Registry
}

// newEnv builds the workspace from inside and the outside directory from
// outside, and registers a check, run when the test ends, that no
// temporary file is left anywhere under base.
func newEnv(t testing.TB, inside, outside fixture) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, base: base, dir: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{e.dir, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	inside.write(t, e.dir)
	outside.write(t, e.outside)
	ws, err := workspace.Open(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	e.ws = ws
	e.reg, err = tools.NewRegistry(files.Tools(ws)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ws.Close()
		if left := tempFiles(t, base); len(left) > 0 {
			t.Errorf("temporary files left behind: %v", left)
		}
	})
	return e
}

// tempFiles lists the fs.writeFile temporary files under dir.
func tempFiles(t testing.TB, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(d.Name(), ".troupe-") && strings.HasSuffix(d.Name(), ".tmp") {
			found = append(found, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// write calls fs.writeFile the way troupe does (Validate, then Call) with
// args (any JSON-marshalable value) and returns its structured result. It
// checks that a success carries the same JSON as text and
// structuredContent.
func (e *env) write(ctx context.Context, args any) (writeResult, error) {
	e.t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.writeRaw(ctx, raw)
}

// writeRaw is write with the arguments as JSON bytes, for arguments
// json.Marshal would not produce.
func (e *env) writeRaw(ctx context.Context, raw []byte) (writeResult, error) {
	e.t.Helper()
	entry, ok := e.reg.Lookup(files.NameWriteFile)
	if !ok {
		e.t.Fatalf("no tool %s", files.NameWriteFile)
	}
	valid, err := entry.Validate(raw)
	if err != nil {
		return writeResult{}, err
	}
	res, err := entry.Tool.Call(ctx, &tools.Request{Arguments: valid})
	if err != nil {
		return writeResult{}, err
	}
	sc, ok := res.StructuredContent.(json.RawMessage)
	if !ok {
		e.t.Fatalf("structuredContent is %T", res.StructuredContent)
	}
	if len(res.Content) != 1 || res.Content[0].Text != string(sc) {
		e.t.Fatalf("text content %+v differs from structuredContent %s", res.Content, sc)
	}
	var out writeResult
	if err := json.Unmarshal(sc, &out); err != nil {
		e.t.Fatalf("%v in %s", err, sc)
	}
	return out, nil
}

// writeResult is fs.writeFile's result, as a client decodes it.
type writeResult struct {
	Path         string `json:"path"`
	BytesWritten int    `json:"bytesWritten"`
}

// wantRefused checks that err is a *tools.Error of the kind whose message
// quotes the client's path arg (unless it is "") and names no host path
// the client did not send (the base directory, or symlink targets given in
// secrets).
func (e *env) wantRefused(err error, kind tools.Kind, arg string, secrets ...string) *tools.Error {
	e.t.Helper()
	te := tooltest.WantError(e.t, err, kind)
	if arg != "" && !strings.Contains(te.Message, fmt.Sprintf("%q", arg)) {
		e.t.Errorf("message %q does not name the path %q", te.Message, arg)
	}
	for _, s := range append(secrets, e.base) {
		if s != "" && !strings.Contains(arg, s) && strings.Contains(te.Message, s) {
			e.t.Errorf("path %q: message %q reveals %q", arg, te.Message, s)
		}
	}
	return te
}

// read returns the content of the file at the slash path rel under dir.
func read(t testing.TB, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testCtx is a context that ends before the test's own deadline, so a
// hanging call fails the test instead of the whole binary.
func testCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
