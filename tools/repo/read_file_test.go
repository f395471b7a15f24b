package repo_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"troupe/tools"
	"troupe/tools/repo"
)

func TestReadFile(t *testing.T) {
	big := strings.Repeat("0123456789", 30000) // 300000 bytes
	ws, dir := fixture{
		"a.txt":       "hello\nworld\n",
		"sub/b.md":    "# title\n",
		"empty":       "",
		"big.txt":     big,
		"euro.txt":    "ab€cd", // € is 3 bytes, at offsets 2..4
		"invalid.txt": "ok \xff\xfe end",
		"crlf.txt":    "a\r\nb\r\n",
		"link.txt":    "->sub/b.md",
	}.build(t)
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)

	read := func(args map[string]any) readResult {
		t.Helper()
		var r readResult
		if err := ts.call(ctx, repo.NameReadFile, args, &r); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return r
	}

	if r := read(map[string]any{"path": "a.txt"}); r != (readResult{Path: "a.txt", Content: "hello\nworld\n"}) {
		t.Errorf("a.txt: %+v", r)
	}
	// The path in the result is clean and relative, however it was named.
	for _, p := range []string{"./sub/b.md", "sub//b.md", "sub/../sub/b.md", filepath.Join(dir, "sub", "b.md")} {
		if r := read(map[string]any{"path": p}); r.Path != "sub/b.md" || r.Content != "# title\n" {
			t.Errorf("path %q: %+v", p, r)
		}
	}
	if r := read(map[string]any{"path": "link.txt"}); r.Path != "link.txt" || r.Content != "# title\n" {
		t.Errorf("symlink inside the workspace: %+v", r)
	}
	if r := read(map[string]any{"path": "empty"}); r.Content != "" || r.Truncated {
		t.Errorf("empty: %+v", r)
	}
	if r := read(map[string]any{"path": "crlf.txt"}); r.Content != "a\r\nb\r\n" {
		t.Errorf("crlf.txt is not returned as is: %q", r.Content)
	}
	if r := read(map[string]any{"path": "invalid.txt"}); r.Content != "ok \uFFFD end" {
		t.Errorf("invalid UTF-8: %q", r.Content)
	}

	// Default limit, explicit limits, exact fits.
	if r := read(map[string]any{"path": "big.txt"}); len(r.Content) != 200000 || !r.Truncated || r.Content != big[:200000] {
		t.Errorf("default limit: %d bytes, truncated %v", len(r.Content), r.Truncated)
	}
	if r := read(map[string]any{"path": "big.txt", "maxBytes": 10}); r.Content != "0123456789" || !r.Truncated {
		t.Errorf("maxBytes 10: %+v", r)
	}
	if r := read(map[string]any{"path": "big.txt", "maxBytes": 300000}); len(r.Content) != 300000 || r.Truncated {
		t.Errorf("maxBytes = size: %d bytes, truncated %v", len(r.Content), r.Truncated)
	}
	if r := read(map[string]any{"path": "a.txt", "maxBytes": 1}); r.Content != "h" || !r.Truncated {
		t.Errorf("maxBytes 1: %+v", r)
	}

	// Truncation never splits €.
	for limit, want := range map[int]string{2: "ab", 3: "ab", 4: "ab", 5: "ab€", 6: "ab€c", 7: "ab€cd"} {
		r := read(map[string]any{"path": "euro.txt", "maxBytes": limit})
		if r.Content != want || r.Truncated != (limit < 7) || !utf8.ValidString(r.Content) {
			t.Errorf("maxBytes %d: %q truncated %v, want %q", limit, r.Content, r.Truncated, want)
		}
	}

	for _, bad := range []any{0, 10000001, -5, 1.5} {
		err := ts.call(ctx, repo.NameReadFile, map[string]any{"path": "a.txt", "maxBytes": bad}, nil)
		wantToolError(t, err, tools.KindInvalidArgument)
	}
}

func TestReadFileRefusals(t *testing.T) {
	ws, dir := fixture{
		"bin.dat":      "PK\x03\x04\x00\x00rest",
		"late-nul.txt": strings.Repeat("a", 8000) + "\x00", // NUL past git's window: text
		"sub/x":        "",
	}.build(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)

	err := ts.call(ctx, repo.NameReadFile, map[string]any{"path": "bin.dat"}, nil)
	te := wantToolError(t, err, tools.KindInvalidArgument, dir)
	if !strings.Contains(te.Message, "binary") || !strings.Contains(te.Message, "10 bytes") {
		t.Errorf("binary refusal %q should say binary and give the size", te.Message)
	}
	// Binary sniffing does not depend on maxBytes.
	err = ts.call(ctx, repo.NameReadFile, map[string]any{"path": "bin.dat", "maxBytes": 2}, nil)
	wantToolError(t, err, tools.KindInvalidArgument, dir)

	var r readResult
	if err := ts.call(ctx, repo.NameReadFile, map[string]any{"path": "late-nul.txt"}, &r); err != nil {
		t.Fatalf("NUL after 8000 bytes: %v", err)
	}
	if len(r.Content) != 8001 {
		t.Errorf("late-nul.txt: %d bytes", len(r.Content))
	}

	err = ts.call(ctx, repo.NameReadFile, map[string]any{"path": "sub"}, nil)
	te = wantToolError(t, err, tools.KindInvalidArgument, dir)
	if !strings.Contains(te.Message, "directory") || !strings.Contains(te.Message, repo.NameListDir) {
		t.Errorf("directory refusal %q should point to %s", te.Message, repo.NameListDir)
	}
	for _, p := range []string{"", "."} {
		err = ts.call(ctx, repo.NameReadFile, map[string]any{"path": p}, nil)
		wantToolError(t, err, tools.KindInvalidArgument, dir)
	}

	err = ts.call(ctx, repo.NameReadFile, map[string]any{"path": "nope.txt"}, nil)
	wantToolError(t, err, tools.KindNotFound, dir)
	err = ts.call(ctx, repo.NameReadFile, map[string]any{"path": "sub/x/y"}, nil)
	wantToolError(t, err, tools.KindNotFound, dir)

	// A FIFO nobody writes to: opening or reading it would block forever.
	done := make(chan error, 1)
	go func() { done <- ts.call(ctx, repo.NameReadFile, map[string]any{"path": "fifo"}, nil) }()
	select {
	case err := <-done:
		te := wantToolError(t, err, tools.KindInvalidArgument, dir)
		if !strings.Contains(te.Message, "not a regular file") {
			t.Errorf("FIFO refusal: %q", te.Message)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO hung")
	}
}
