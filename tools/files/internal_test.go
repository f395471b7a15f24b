package files

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"troupe/tools"
	"troupe/workspace"
)

// TestCancelBeforeRename cancels a call at the last moment it can be
// undone: the temporary file is written and flushed, the rename is next.
// The call must fail, leave the target as it was and remove the temporary
// file, which the hook sees in place first, so the test cannot pass
// without the cleanup being exercised.
func TestCancelBeforeRename(t *testing.T) {
	for _, name := range []string{"old.txt", "new.txt", "sub/new.txt"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "old.txt"), []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			ws, err := workspace.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ws.Close()

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var seen []string
			tool := &writeFileTool{ws: ws, beforeRename: func() {
				seen = temps(t, dir)
				cancel()
			}}
			_, err = tool.Call(ctx, &tools.Request{Arguments: []byte(`{"path": "` + name + `", "content": "new", "createDirs": true}`)})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want context.Canceled", err)
			}
			if len(seen) != 1 {
				t.Fatalf("before the rename, temporary files were %v; want exactly one", seen)
			}
			if left := temps(t, dir); len(left) > 0 {
				t.Errorf("temporary files left behind: %v", left)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "old.txt")); err != nil || string(b) != "old" {
				t.Errorf("old.txt: %q %v", b, err)
			}
			if name != "old.txt" {
				if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s exists: %v", name, err)
				}
			}
		})
	}
}

// temps lists the temporary files under dir, relative to it.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".troupe-") && strings.HasSuffix(d.Name(), ".tmp") {
			rel, _ := filepath.Rel(dir, p)
			found = append(found, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestTempName checks the temporary file's name: hidden, beside the
// target, named after it, and short enough for the file system even when
// the target's name is not, without cutting a UTF-8 character.
func TestTempName(t *testing.T) {
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	long := strings.Repeat("x", tempBaseMax-1) + "éé" // the cut falls inside the first é
	for base, prefix := range map[string]string{
		"main.go": ".main.go.troupe-",
		long:      "." + strings.Repeat("x", tempBaseMax-1) + ".troupe-",
	} {
		f, name, err := createTemp(root, base, 0o600)
		if err != nil {
			t.Fatalf("%q: %v", base, err)
		}
		f.Close()
		if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ".tmp") || len(name) != len(prefix)+16+4 {
			t.Errorf("%q: temporary name %q", base, name)
		}
		if err := root.Remove(name); err != nil {
			t.Error(err)
		}
	}
	// Two names for the same target differ.
	f1, n1, err1 := createTemp(root, "a", 0o600)
	f2, n2, err2 := createTemp(root, "a", 0o600)
	if err1 != nil || err2 != nil || n1 == n2 {
		t.Errorf("%q %v, %q %v", n1, err1, n2, err2)
	}
	f1.Close()
	f2.Close()
}

func TestLoneSurrogate(t *testing.T) {
	for lit, want := range map[string]int{
		`""`:                    -1,
		`"plain"`:               -1,
		`"\n\t\"\\\/"`:          -1,
		`"\u0041\u00e9"`:        -1,
		`"\ud83d\ude00"`:        -1,
		`"\uDBFF\uDFFF"`:        -1,
		`"\\ud800"`:             -1, // a backslash, then the text "ud800"
		`"\ud800"`:              1,
		`"\udfff"`:              1,
		`"ab\ud83d"`:            3,
		`"\ud83dx"`:             1,
		`"\ud83d\n"`:            1,
		`"\ud83d\u0041"`:        1,
		`"\ud83d\ud83d\ude00"`:  1,
		`"\ude00\ud83d"`:        1,
		`"\\\ud800"`:            3,
		`"😀\ud83d\ude00\udc00"`: 17, // 😀 is four bytes
	} {
		if got := loneSurrogate([]byte(lit)); got != want {
			t.Errorf("%s: got %d, want %d", lit, got, want)
		}
	}
}
