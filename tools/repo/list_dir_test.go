package repo_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/repo"
)

func TestListDir(t *testing.T) {
	ws, dir := fixture{
		"b.txt":       "hello",
		"a.txt":       "",
		"sub/c.go":    "package c\n",
		"link":        "->a.txt",
		"linkdir":     "->sub",
		".hidden":     "h",
		"Upper":       "u",
		"emptydir/":   "",
		"sub/deeper/": "",
	}.build(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)

	var got listResult
	if err := ts.call(ctx, repo.NameListDir, map[string]any{"path": ""}, &got); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, e := range got.Entries {
		row := e.Name + " " + e.Type
		if e.SizeBytes != nil {
			row += fmt.Sprintf(" %d", *e.SizeBytes)
		}
		rows = append(rows, row)
	}
	want := []string{
		".hidden file 1", "Upper file 1", "a.txt file 0", "b.txt file 5", "emptydir dir",
		"fifo other", "link symlink", "linkdir symlink", "sub dir",
	}
	if !slices.Equal(rows, want) || got.Truncated {
		t.Errorf("listing of the root:\n got %q truncated=%v\nwant %q", rows, got.Truncated, want)
	}

	// "." is the root too, and a symlink to a directory inside is listed
	// as that directory.
	for _, p := range []string{".", "./", "linkdir", "sub/deeper/.."} {
		var r listResult
		if err := ts.call(ctx, repo.NameListDir, map[string]any{"path": p}, &r); err != nil {
			t.Fatalf("path %q: %v", p, err)
		}
		if len(r.Entries) == 0 {
			t.Errorf("path %q: no entries", p)
		}
	}
	var sub listResult
	if err := ts.call(ctx, repo.NameListDir, map[string]any{"path": "linkdir"}, &sub); err != nil {
		t.Fatal(err)
	}
	if len(sub.Entries) != 2 || sub.Entries[0].Name != "c.go" || sub.Entries[1].Name != "deeper" {
		t.Errorf("linkdir: %+v", sub.Entries)
	}

	var empty listResult
	if err := ts.call(ctx, repo.NameListDir, map[string]any{"path": "emptydir"}, &empty); err != nil {
		t.Fatal(err)
	}
	if empty.Entries == nil || len(empty.Entries) != 0 {
		t.Errorf("empty dir: entries %#v, want an empty list", empty.Entries)
	}
}

func TestListDirMaxEntries(t *testing.T) {
	fx := fixture{}
	for i := range 2500 {
		fx[fmt.Sprintf("f%05d", 2500-i)] = ""
	}
	ws, _ := fx.build(t)
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)

	cases := []struct {
		max       any // nil: the default
		wantLen   int
		truncated bool
	}{
		{nil, 2000, true},
		{1, 1, true},
		{7, 7, true},
		{2500, 2500, false},
		{100000, 2500, false},
	}
	for _, tc := range cases {
		args := map[string]any{"path": "."}
		if tc.max != nil {
			args["maxEntries"] = tc.max
		}
		var got listResult
		if err := ts.call(ctx, repo.NameListDir, args, &got); err != nil {
			t.Fatalf("maxEntries %v: %v", tc.max, err)
		}
		if len(got.Entries) != tc.wantLen || got.Truncated != tc.truncated {
			t.Errorf("maxEntries %v: %d entries, truncated %v; want %d, %v", tc.max, len(got.Entries), got.Truncated, tc.wantLen, tc.truncated)
			continue
		}
		// The kept entries are the first ones by name, whatever the
		// order the directory returned them in.
		for i, e := range got.Entries {
			if want := fmt.Sprintf("f%05d", i+1); e.Name != want {
				t.Errorf("maxEntries %v: entry %d is %s, want %s", tc.max, i, e.Name, want)
				break
			}
		}
	}

	for _, bad := range []any{0, -1, 100001, 2.5, "10"} {
		err := ts.call(ctx, repo.NameListDir, map[string]any{"path": ".", "maxEntries": bad}, nil)
		wantToolError(t, err, tools.KindInvalidArgument)
	}
	// 5.0 is an integer to JSON Schema.
	var got listResult
	if err := ts.call(ctx, repo.NameListDir, map[string]any{"path": ".", "maxEntries": 5.0}, &got); err != nil || len(got.Entries) != 5 {
		t.Errorf("maxEntries 5.0: %v, %d entries", err, len(got.Entries))
	}
}

func TestListDirErrors(t *testing.T) {
	ws, dir := fixture{"a.txt": "x", "sub/b.txt": "y"}.build(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := newToolSet(t, ws, repo.Options{})
	ctx := testCtx(t, 10*time.Second)

	err := ts.call(ctx, repo.NameListDir, map[string]any{"path": "a.txt"}, nil)
	if te := wantToolError(t, err, tools.KindInvalidArgument, dir); !strings.Contains(te.Message, repo.NameReadFile) {
		t.Errorf("listing a file: %q does not point to %s", te.Message, repo.NameReadFile)
	}
	err = ts.call(ctx, repo.NameListDir, map[string]any{"path": "missing"}, nil)
	wantToolError(t, err, tools.KindNotFound, dir)
	err = ts.call(ctx, repo.NameListDir, map[string]any{"path": "a.txt/x"}, nil)
	wantToolError(t, err, tools.KindNotFound, dir)
	// Opening a FIFO must not wait for a writer.
	err = ts.call(ctx, repo.NameListDir, map[string]any{"path": "fifo"}, nil)
	wantToolError(t, err, tools.KindInvalidArgument, dir)
	// The schema wants a path and nothing else.
	err = ts.call(ctx, repo.NameListDir, map[string]any{}, nil)
	wantToolError(t, err, tools.KindInvalidArgument)
	err = ts.call(ctx, repo.NameListDir, map[string]any{"path": ".", "recursive": true}, nil)
	wantToolError(t, err, tools.KindInvalidArgument)

	if os.Geteuid() != 0 {
		if err := os.Chmod(filepath.Join(dir, "sub"), 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "sub"), 0o755) })
		err = ts.call(ctx, repo.NameListDir, map[string]any{"path": "sub"}, nil)
		wantToolError(t, err, tools.KindPermissionDenied, dir)
	}
}
