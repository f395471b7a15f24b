package repo_test

import (
	"fmt"
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
	if r := read(map[string]any{"path": "big.txt"}); len(r.Content) != 8192 || !r.Truncated || r.Content != big[:8192] {
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

// rangeResult is repo.readFile's result with its range fields.
type rangeResult struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Offset     int64  `json:"offset"`
	StartLine  int64  `json:"startLine"`
	EndLine    int64  `json:"endLine"`
	Truncated  bool   `json:"truncated"`
	NextOffset *int64 `json:"nextOffset"`
	NextLine   int64  `json:"nextLine"`
	Content    string `json:"content"`
}

// A file read in ranges: by bytes following nextOffset, by lines following
// nextLine, each result saying which range it holds; the pieces make up
// the file exactly.
func TestReadFileRanges(t *testing.T) {
	var lines strings.Builder
	for i := 1; i <= 5000; i++ {
		fmt.Fprintf(&lines, "line %d: %s\n", i, strings.Repeat("x", i%50))
	}
	text := lines.String()
	ws, _ := fixture{
		"lines.txt":   text,
		"euro.txt":    "ab€cd", // € at bytes 2..4
		"noeol.txt":   "one\ntwo\nthree",
		"long.txt":    strings.Repeat("y", 100) + "\nshort\n",
		"empty":       "",
		"unicode.txt": strings.Repeat("é", 5000),
	}.build(t)
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)
	read := func(args map[string]any) rangeResult {
		t.Helper()
		var r rangeResult
		if err := ts.call(ctx, repo.NameReadFile, args, &r); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return r
	}

	// By bytes: follow nextOffset to the end.
	var got strings.Builder
	off, steps := int64(0), 0
	for {
		r := read(map[string]any{"path": "lines.txt", "offset": off, "maxBytes": 7000})
		if r.Offset != off || r.Size != int64(len(text)) || r.Content != text[off:off+int64(len(r.Content))] {
			t.Fatalf("offset %d: got offset %d size %d", off, r.Offset, r.Size)
		}
		got.WriteString(r.Content)
		steps++
		if r.NextOffset == nil {
			if r.Truncated || off+int64(len(r.Content)) != int64(len(text)) {
				t.Fatalf("the last piece ends at %d of %d, truncated %v", off+int64(len(r.Content)), len(text), r.Truncated)
			}
			break
		}
		if !r.Truncated || *r.NextOffset != off+7000 {
			t.Fatalf("offset %d: nextOffset %v, truncated %v", off, *r.NextOffset, r.Truncated)
		}
		off = *r.NextOffset
	}
	if got.String() != text || steps != (len(text)+6999)/7000 {
		t.Fatalf("the byte ranges do not make up the file (%d steps)", steps)
	}

	// By lines: a range, then following nextLine; a cut ends at a whole line.
	r := read(map[string]any{"path": "lines.txt", "startLine": 10, "endLine": 12})
	want := "line 10: " + strings.Repeat("x", 10) + "\nline 11: " + strings.Repeat("x", 11) + "\nline 12: " + strings.Repeat("x", 12) + "\n"
	if r.Content != want || r.StartLine != 10 || r.EndLine != 12 || r.Truncated || r.NextLine != 13 ||
		r.Offset != int64(strings.Index(text, "line 10:")) || *r.NextOffset != r.Offset+int64(len(want)) {
		t.Fatalf("lines 10-12: %+v", r)
	}
	got.Reset()
	line, steps := int64(1), 0
	for {
		r := read(map[string]any{"path": "lines.txt", "startLine": line, "maxBytes": 5000})
		if r.StartLine != line || !strings.HasSuffix(r.Content, "\n") || len(r.Content) > 5000 {
			t.Fatalf("startLine %d: %+v", line, r.StartLine)
		}
		if n := int64(strings.Count(r.Content, "\n")); r.EndLine != line+n-1 {
			t.Fatalf("startLine %d: endLine %d for %d lines", line, r.EndLine, n)
		}
		got.WriteString(r.Content)
		steps++
		if r.NextLine == 0 {
			if r.EndLine != 5000 || r.NextOffset != nil {
				t.Fatalf("the last piece ends with line %d, nextOffset %v", r.EndLine, r.NextOffset)
			}
			break
		}
		if !r.Truncated || r.NextLine != r.EndLine+1 {
			t.Fatalf("startLine %d: %+v", line, r)
		}
		line = r.NextLine
	}
	if got.String() != text || steps < 2 {
		t.Fatalf("the line ranges do not make up the file (%d steps)", steps)
	}
	if r := read(map[string]any{"path": "lines.txt", "endLine": 2}); r.Content != "line 1: x\nline 2: xx\n" || r.StartLine != 1 || r.EndLine != 2 {
		t.Errorf("endLine alone: %+v", r)
	}
	if r := read(map[string]any{"path": "lines.txt", "startLine": 4999, "endLine": 9999}); r.EndLine != 5000 || r.NextOffset != nil || r.Truncated {
		t.Errorf("endLine past the end: %+v", r)
	}

	// Unterminated last line; a line longer than maxBytes.
	if r := read(map[string]any{"path": "noeol.txt", "startLine": 3}); r.Content != "three" || r.EndLine != 3 || r.NextLine != 0 || r.NextOffset != nil {
		t.Errorf("unterminated last line: %+v", r)
	}
	if r := read(map[string]any{"path": "long.txt", "startLine": 1, "maxBytes": 10}); r.Content != "yyyyyyyyyy" || !r.Truncated ||
		r.EndLine != 1 || r.NextLine != 0 || *r.NextOffset != 10 {
		t.Errorf("a line longer than maxBytes: %+v", r)
	}

	// An offset inside a character starts after it; a cut never splits one.
	if r := read(map[string]any{"path": "euro.txt", "offset": 3}); r.Content != "cd" || r.Offset != 5 {
		t.Errorf("offset inside €: %+v", r)
	}
	if r := read(map[string]any{"path": "euro.txt", "offset": 2, "maxBytes": 4}); r.Content != "€c" || *r.NextOffset != 6 {
		t.Errorf("from €: %+v", r)
	}
	if r := read(map[string]any{"path": "unicode.txt", "offset": 1001, "maxBytes": 1001}); r.Offset != 1002 || len(r.Content) != 1000 || !utf8.ValidString(r.Content) {
		t.Errorf("unicode: offset %d, %d bytes", r.Offset, len(r.Content))
	}
	if r := read(map[string]any{"path": "euro.txt", "offset": 7}); r.Content != "" || r.NextOffset != nil || r.Truncated {
		t.Errorf("offset at the end: %+v", r)
	}

	// Bad ranges: each a clear invalid_argument.
	for _, c := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "euro.txt", "offset": 8}, `offset 8 is past the end of "euro.txt": it has 7 bytes`},
		{map[string]any{"path": "noeol.txt", "startLine": 4}, `startLine 4 is past the end of "noeol.txt": it has 3 lines`},
		{map[string]any{"path": "lines.txt", "startLine": 5001}, `startLine 5001 is past the end of "lines.txt": it has 5000 lines`},
		{map[string]any{"path": "empty", "startLine": 1}, `it has 0 lines`},
		{map[string]any{"path": "lines.txt", "startLine": 5, "endLine": 4}, "endLine 4 is before startLine 5"},
		{map[string]any{"path": "lines.txt", "offset": 0, "startLine": 1}, "either offset (a range by bytes) or startLine/endLine (a range by lines), not both"},
		{map[string]any{"path": "lines.txt", "offset": 10, "endLine": 1}, "not both"},
		{map[string]any{"path": "lines.txt", "offset": -1}, "offset"},
		{map[string]any{"path": "lines.txt", "offset": 1.5}, "offset"},
		{map[string]any{"path": "lines.txt", "startLine": 0}, "startLine"},
		{map[string]any{"path": "lines.txt", "endLine": 0}, "endLine"},
		{map[string]any{"path": "lines.txt", "startLine": "3"}, "startLine"},
	} {
		err := ts.call(ctx, repo.NameReadFile, c.args, nil)
		if te := wantToolError(t, err, tools.KindInvalidArgument); te != nil && !strings.Contains(te.Message, c.want) {
			t.Errorf("%v: %q, want it to say %q", c.args, te.Message, c.want)
		}
	}
}
