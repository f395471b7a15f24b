package files_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/files"
)

func TestWriteFileCreates(t *testing.T) {
	e := newEnv(t, fixture{"dir/": ""}, nil)
	ctx := testCtx(t)

	for arg, rel := range map[string]string{
		"new.txt":                         "new.txt",
		"./dir/../dir/sub.txt":            "dir/sub.txt",
		filepath.Join(e.dir, "abs.txt"):   "abs.txt",
		"unicode-é.txt":                   "unicode-é.txt",
		"dir/" + strings.Repeat("n", 250): "dir/" + strings.Repeat("n", 250), // its temp name must be cut
	} {
		content := "hello from " + arg + "\n"
		res, err := e.write(ctx, map[string]any{"path": arg, "content": content})
		if err != nil {
			t.Fatalf("writing %q: %v", arg, err)
		}
		if res != (writeResult{Path: rel, BytesWritten: len(content)}) {
			t.Errorf("writing %q: got %+v", arg, res)
		}
		if got := read(t, e.dir, rel); got != content {
			t.Errorf("writing %q: file holds %q", arg, got)
		}
	}

	// A new file gets 0644 less the umask, like one os.WriteFile makes.
	ref := filepath.Join(e.dir, "ref")
	if err := os.WriteFile(ref, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want, got := stat(t, ref).Mode(), stat(t, filepath.Join(e.dir, "new.txt")).Mode()
	if got != want {
		t.Errorf("new file's mode is %v, want %v", got, want)
	}

	// Empty content makes an empty file.
	if res, err := e.write(ctx, map[string]any{"path": "empty", "content": ""}); err != nil || res.BytesWritten != 0 {
		t.Fatalf("empty content: %+v %v", res, err)
	}
	if read(t, e.dir, "empty") != "" {
		t.Error("empty file is not empty")
	}
}

func TestWriteFileOverwrites(t *testing.T) {
	e := newEnv(t, fixture{"a.txt": "a long old content\n", "b.sh": "#!/bin/sh\n", "c.txt": "private"}, nil)
	ctx := testCtx(t)
	// Modes the umask would narrow, so keeping them takes an explicit chmod.
	modes := map[string]fs.FileMode{"a.txt": 0o664, "b.sh": 0o777, "c.txt": 0o600}
	for name, mode := range modes {
		if err := os.Chmod(filepath.Join(e.dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range modes {
		for _, content := range []string{"new\n", "", "again, longer than the first time\n"} {
			res, err := e.write(ctx, map[string]any{"path": name, "content": content})
			if err != nil {
				t.Fatalf("overwriting %s: %v", name, err)
			}
			if res.BytesWritten != len(content) {
				t.Errorf("overwriting %s: bytesWritten %d, want %d", name, res.BytesWritten, len(content))
			}
			if got := read(t, e.dir, name); got != content {
				t.Errorf("overwriting %s: file holds %q, want %q", name, got, content)
			}
			if got := stat(t, filepath.Join(e.dir, name)).Mode(); got != mode {
				t.Errorf("overwriting %s: mode %v, want %v", name, got, mode)
			}
		}
	}
}

func TestWriteFileCreateDirs(t *testing.T) {
	e := newEnv(t, fixture{"have/": "", "file.txt": "x"}, nil)
	ctx := testCtx(t)

	// Without createDirs, a missing parent is not_found, the message says
	// what to do, and nothing is made.
	for _, p := range []string{"missing/x.txt", "have/missing/deeper/x.txt"} {
		_, err := e.write(ctx, map[string]any{"path": p, "content": "x"})
		te := e.wantRefused(err, tools.KindNotFound, p)
		if !strings.Contains(te.Message, `"createDirs": true`) {
			t.Errorf("message %q does not suggest createDirs", te.Message)
		}
		_, err = e.write(ctx, map[string]any{"path": p, "content": "x", "createDirs": false})
		e.wantRefused(err, tools.KindNotFound, p)
	}
	if _, err := os.Lstat(filepath.Join(e.dir, "have", "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused write made a directory: %v", err)
	}

	// With it, every missing directory is made, 0755 less the umask.
	res, err := e.write(ctx, map[string]any{"path": "have/a/b/c/x.txt", "content": "deep", "createDirs": true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != "have/a/b/c/x.txt" || read(t, e.dir, "have/a/b/c/x.txt") != "deep" {
		t.Errorf("got %+v", res)
	}
	ref := filepath.Join(e.dir, "ref")
	if err := os.Mkdir(ref, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, want := stat(t, filepath.Join(e.dir, "have", "a", "b")).Mode(), stat(t, ref).Mode(); got != want {
		t.Errorf("made directory has mode %v, want %v", got, want)
	}
	// Directories that exist are fine with createDirs too.
	if _, err := e.write(ctx, map[string]any{"path": "have/a/y.txt", "content": "y", "createDirs": true}); err != nil {
		t.Fatal(err)
	}

	// A file where a directory should be is not_found, with or without
	// createDirs, and stays a file.
	for _, create := range []bool{false, true} {
		_, err := e.write(ctx, map[string]any{"path": "file.txt/x.txt", "content": "x", "createDirs": create})
		e.wantRefused(err, tools.KindNotFound, "file.txt/x.txt")
	}
	if read(t, e.dir, "file.txt") != "x" {
		t.Error("file.txt changed")
	}
}

// TestWriteFileSymlinks names symlinks as the file and as directories on
// the way to it, leading inside and outside, and checks that each write is
// refused with permission_denied, that nothing changed on either side of
// the link, and that the message does not say where the link points.
func TestWriteFileSymlinks(t *testing.T) {
	inside := fixture{
		"real.txt":       "real",
		"realdir/f.txt":  "in realdir",
		"to-real":        "->real.txt",
		"to-realdir":     "->realdir",
		"dangling":       "->nowhere.txt",
		"to-self-dir":    "->.",
		"deep/a/link":    "->../../realdir",
		"abs-to-real":    "", // replaced below: an absolute link inside
		"to-outside":     "->../outside/secret.txt",
		"to-outside-dir": "->../outside",
		"to-etc":         "->/etc",
	}
	delete(inside, "abs-to-real")
	e := newEnv(t, inside, fixture{"secret.txt": "secret", "sub/": ""})
	if err := os.Symlink(filepath.Join(e.dir, "real.txt"), filepath.Join(e.dir, "abs-to-real")); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)

	refused := []string{
		"to-real", "abs-to-real", "dangling", "to-outside", // the file itself
		"to-realdir", "to-self-dir", "to-outside-dir", // a link to a directory, as the file
		"to-realdir/f.txt", "to-realdir/new.txt", // through a link inside
		"to-self-dir/real.txt",
		"deep/a/link/f.txt",
		"to-outside-dir/secret.txt", "to-outside-dir/new.txt", "to-outside-dir/sub/new.txt", // through a link outside
		"to-etc/passwd", "to-etc/troupe-test",
		filepath.Join(e.dir, "to-real"), filepath.Join(e.dir, "to-realdir", "f.txt"),
	}
	for _, p := range refused {
		for _, create := range []bool{false, true} {
			_, err := e.write(ctx, map[string]any{"path": p, "content": "pwned", "createDirs": create})
			te := e.wantRefused(err, tools.KindPermissionDenied, p, e.outside, "/etc", "realdir/f.txt", "nowhere")
			if !strings.Contains(te.Message, "symbolic link") {
				t.Errorf("path %q: message %q does not say why", p, te.Message)
			}
		}
	}
	// The message names the link when it is a directory on the way.
	_, err := e.write(ctx, map[string]any{"path": "deep/a/link/f.txt", "content": "x"})
	if te := e.wantRefused(err, tools.KindPermissionDenied, "deep/a/link/f.txt"); !strings.Contains(te.Message, `"deep/a/link"`) {
		t.Errorf("message %q does not name the link", te.Message)
	}

	// Nothing changed: not the targets, not the links, and no file was
	// made where a dangling link pointed.
	for rel, want := range map[string]string{"real.txt": "real", "realdir/f.txt": "in realdir"} {
		if got := read(t, e.dir, rel); got != want {
			t.Errorf("%s holds %q", rel, got)
		}
	}
	if got := read(t, e.outside, "secret.txt"); got != "secret" {
		t.Errorf("outside secret.txt holds %q", got)
	}
	for _, name := range []string{"new.txt", "sub/new.txt"} {
		if _, err := os.Lstat(filepath.Join(e.outside, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("outside %s exists: %v", name, err)
		}
	}
	for _, name := range []string{"nowhere.txt", "realdir/new.txt"} {
		if _, err := os.Lstat(filepath.Join(e.dir, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists: %v", name, err)
		}
	}
	for _, link := range []string{"to-real", "abs-to-real", "dangling", "to-outside", "to-realdir", "deep/a/link"} {
		if fi, err := os.Lstat(filepath.Join(e.dir, link)); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a symlink: %v", link, err)
		}
	}
}

func TestWriteFileConfinement(t *testing.T) {
	e := newEnv(t, fixture{"file.txt": "inside"}, fixture{"secret.txt": "secret"})
	ctx := testCtx(t)

	outside := []string{
		"..",
		"../x.txt",
		"../outside/secret.txt",
		"a/../../x.txt",
		"/etc/passwd",
		"/tmp/troupe-write-test.txt",
		filepath.Join(e.outside, "secret.txt"),
		filepath.Join(e.outside, "new.txt"),
		e.dir + "/../outside/new.txt",
		"/proc/self/cwd/x.txt",
	}
	for _, p := range outside {
		for _, create := range []bool{false, true} {
			_, err := e.write(ctx, map[string]any{"path": p, "content": "pwned", "createDirs": create})
			e.wantRefused(err, tools.KindPermissionDenied, p, e.outside)
		}
	}
	for _, p := range []string{"a\x00b", "file.txt\x00", "\x00"} {
		_, err := e.write(ctx, map[string]any{"path": p, "content": "x"})
		e.wantRefused(err, tools.KindInvalidArgument, p)
	}
	if got := read(t, e.outside, "secret.txt"); got != "secret" {
		t.Errorf("secret.txt holds %q", got)
	}
	for _, p := range []string{filepath.Join(e.outside, "new.txt"), "/tmp/troupe-write-test.txt"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists: %v", p, err)
		}
	}
}

func TestWriteFileRefusesNonFiles(t *testing.T) {
	e := newEnv(t, fixture{"dir/f.txt": "f", "empty/": ""}, nil)
	if err := syscall.Mkfifo(filepath.Join(e.dir, "fifo"), 0o644); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	ctx := testCtx(t)

	for _, p := range []string{
		"dir", "empty", filepath.Join(e.dir, "dir"), // directories
		"", ".", "./", e.dir, e.dir + "/", "dir/..", // the root
		"fifo",                                      // a FIFO: refused at once, not hanging on a reader
		"new/", "dir/f.txt/", "new/.", "dir/sub/..", // paths that name directories
	} {
		_, err := e.write(ctx, map[string]any{"path": p, "content": "x", "createDirs": true})
		e.wantRefused(err, tools.KindInvalidArgument, p)
	}
	if _, err := os.Lstat(filepath.Join(e.dir, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("new exists: %v", err)
	}
	if fi := lstat(t, filepath.Join(e.dir, "fifo")); fi.Mode()&fs.ModeNamedPipe == 0 {
		t.Errorf("fifo is now %v", fi.Mode())
	}
	if fi := lstat(t, filepath.Join(e.dir, "dir")); !fi.IsDir() || read(t, e.dir, "dir/f.txt") != "f" {
		t.Error("dir changed")
	}
}

// TestWriteFileReadOnly checks that a file its mode protects is not
// replaced, though its directory would allow the rename.
func TestWriteFileReadOnly(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write any file; the kernel's permission check cannot refuse")
	}
	e := newEnv(t, fixture{"ro.txt": "keep me"}, nil)
	if err := os.Chmod(filepath.Join(e.dir, "ro.txt"), 0o444); err != nil {
		t.Fatal(err)
	}
	_, err := e.write(testCtx(t), map[string]any{"path": "ro.txt", "content": "x"})
	e.wantRefused(err, tools.KindPermissionDenied, "ro.txt")
	if read(t, e.dir, "ro.txt") != "keep me" {
		t.Error("read-only file replaced")
	}
}

func TestWriteFileContentLimits(t *testing.T) {
	e := newEnv(t, fixture{"old.txt": "old"}, nil)
	ctx := testCtx(t)
	// The big contents go straight to Call: validating 16 MiB against the
	// schema takes seconds under the race detector and proves nothing the
	// maxLength check below does not.
	tool := files.Tools(e.ws)[0]
	call := func(path, content string) (*protocol.CallToolResult, error) {
		return tool.Call(ctx, &tools.Request{Arguments: []byte(`{"path": "` + path + `", "content": "` + content + `"}`)})
	}

	// Exactly the limit is written.
	full := strings.Repeat("x", files.MaxWriteBytes)
	if _, err := call("full.txt", full); err != nil {
		t.Fatalf("content of exactly MaxWriteBytes: %v", err)
	}
	if fi := stat(t, filepath.Join(e.dir, "full.txt")); fi.Size() != files.MaxWriteBytes {
		t.Errorf("full.txt has %d bytes", fi.Size())
	}
	// One byte more is refused, and so is content with fewer characters
	// than the schema's maxLength but more bytes ("é" is two).
	for _, c := range []string{full + "x", strings.Repeat("é", files.MaxWriteBytes/2+1)} {
		_, err := call("old.txt", c)
		if te := e.wantRefused(err, tools.KindInvalidArgument, ""); !strings.Contains(te.Message, fmt.Sprint(files.MaxWriteBytes)) {
			t.Errorf("message %q does not give the limit", te.Message)
		}
	}
	if read(t, e.dir, "old.txt") != "old" {
		t.Error("old.txt changed")
	}

	// The schema states the limit, so clients and the registry refuse
	// longer content before the call.
	var schema struct {
		Properties struct {
			Content struct {
				MaxLength int `json:"maxLength"`
			} `json:"content"`
		} `json:"properties"`
	}
	entry, _ := e.reg.Lookup(files.NameWriteFile)
	if err := json.Unmarshal(entry.Spec().InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if schema.Properties.Content.MaxLength != files.MaxWriteBytes {
		t.Errorf("content's maxLength is %d, want %d", schema.Properties.Content.MaxLength, files.MaxWriteBytes)
	}
}

// TestWriteFileText checks that content reaches the file as the client
// sent it, or is refused when it is not UTF-8, rather than quietly
// changed into replacement characters.
func TestWriteFileText(t *testing.T) {
	e := newEnv(t, fixture{"old.txt": "old"}, nil)
	ctx := testCtx(t)

	bad := []string{
		"\xff",               // raw bytes that are not UTF-8
		"ok \xc3 cut",        // a cut sequence
		`\ud800`,             // a lone high surrogate
		`\udc00`,             // a lone low surrogate
		`x\ud83dy`,           // a high surrogate followed by text
		`\ud83d\u0041`,       // a high surrogate followed by another escape
		`\ude00\ud83d`,       // a pair in the wrong order
		`\\\ud800`,           // an escaped backslash, then a lone surrogate
		`fine\n\t\"\/\ud83d`, // other escapes first, then a lone surrogate at the end
	}
	for _, c := range bad {
		_, err := e.writeRaw(ctx, []byte(`{"path": "old.txt", "content": "`+c+`"}`))
		e.wantRefused(err, tools.KindInvalidArgument, "")
	}
	if read(t, e.dir, "old.txt") != "old" {
		t.Error("old.txt changed")
	}

	good := map[string]string{
		`\ud83d\ude00`:       "😀",           // a surrogate pair
		`\uD83D\uDE00 ok`:    "😀 ok",        // in upper case
		`\\ud800`:            `\ud800`,      // an escaped backslash: six plain characters
		`caf\u00e9 é \u0000`: "café é \x00", // a NUL is text too
		`\"\\\/\b\f\n\r\t`:   "\"\\/\b\f\n\r\t",
	}
	for c, want := range good {
		if _, err := e.writeRaw(ctx, []byte(`{"path": "good.txt", "content": "`+c+`"}`)); err != nil {
			t.Errorf("content %s: %v", c, err)
			continue
		}
		if got := read(t, e.dir, "good.txt"); got != want {
			t.Errorf("content %s: file holds %q, want %q", c, got, want)
		}
	}

	// Arguments that are not there or not strings, as a direct caller can
	// send them (the registry refuses them before).
	tool := files.Tools(e.ws)[0]
	for _, raw := range []string{`{"path": "a.txt"}`, `{"content": "x"}`, `{"path": "a.txt", "content": null}`,
		`{"path": "a.txt", "content": 5}`, `{"path": "a.txt", "content": "x", "extra": 1}`} {
		_, err := tool.Call(ctx, &tools.Request{Arguments: []byte(raw)})
		e.wantRefused(err, tools.KindInvalidArgument, "")
	}
}

// TestWriteFileCancelled checks that a call whose context has ended
// writes nothing.
func TestWriteFileCancelled(t *testing.T) {
	e := newEnv(t, fixture{"old.txt": "old"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, p := range []string{"old.txt", "new.txt", "newdir/new.txt"} {
		_, err := e.write(ctx, map[string]any{"path": p, "content": "new", "createDirs": true})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: got %v, want context.Canceled", p, err)
		}
	}
	if read(t, e.dir, "old.txt") != "old" {
		t.Error("old.txt changed")
	}
	for _, p := range []string{"new.txt", "newdir"} {
		if _, err := os.Lstat(filepath.Join(e.dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists: %v", p, err)
		}
	}
}

// TestWriteFileConcurrent runs writers of the same file side by side: each
// must succeed, the file must end as one writer's whole content, and no
// temporary file may collide with another or stay behind.
func TestWriteFileConcurrent(t *testing.T) {
	e := newEnv(t, fixture{"shared.txt": "old"}, nil)
	ctx := testCtx(t)
	const writers = 16
	contents := make(map[string]bool, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		c := strings.Repeat(fmt.Sprintf("writer %d\n", i), 10000)
		contents[c] = true
		wg.Go(func() {
			if _, err := e.write(ctx, map[string]any{"path": "shared.txt", "content": c}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if !contents[read(t, e.dir, "shared.txt")] {
		t.Error("shared.txt holds no single writer's content")
	}
}

func TestWriteFileSpec(t *testing.T) {
	e := newEnv(t, nil, nil)
	entry, ok := e.reg.Lookup(files.NameWriteFile)
	if !ok {
		t.Fatal("fs.writeFile is not registered")
	}
	s := entry.Spec()
	if s.Name != "fs.writeFile" || s.Title != "Write file" || s.OutputSchema == nil {
		t.Errorf("spec: %+v", s)
	}
	a := s.Annotations
	if a == nil || a.ReadOnlyHint == nil || *a.ReadOnlyHint || a.DestructiveHint == nil || !*a.DestructiveHint ||
		a.IdempotentHint == nil || !*a.IdempotentHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
		t.Errorf("annotations: %+v", a)
	}
	sf := s.Safety
	if !sf.HighRisk || !sf.RequiresApproval || !sf.NeedsApproval() || sf.SandboxProfile != "" ||
		len(sf.SideEffects) != 1 || sf.SideEffects[0] != "filesystem" {
		t.Errorf("safety: %+v", sf)
	}
	for _, want := range []string{"atomic", "approval", "symbolic link", "16 MiB", "createDirs"} {
		if !strings.Contains(s.Description, want) {
			t.Errorf("description does not mention %q", want)
		}
	}
	if !strings.Contains(string(s.InputSchema), fmt.Sprint(files.MaxWriteBytes)) {
		t.Error("input schema does not state the size limit")
	}
}

func stat(t testing.TB, p string) fs.FileInfo {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func lstat(t testing.TB, p string) fs.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
