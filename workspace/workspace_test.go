package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRel(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// The workspace is also reachable through a symlink; both spellings of
	// an absolute path inside it are accepted.
	link := filepath.Join(root, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	ok := map[string]string{
		"": ".", ".": ".", "a/b": "a/b", "a/../b": "b", "./a//b/": "a/b",
		filepath.Join(dir, "x"): "x", filepath.Join(link, "x"): "x", dir: ".",
	}
	for in, want := range ok {
		if got, err := ws.Rel(in); err != nil || got != want {
			t.Errorf("Rel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"..", "../x", "a/../../x", "/etc", dir + "x", root, "/proc/self/root" + dir} {
		if _, err := ws.Rel(in); !IsOutside(err) {
			t.Errorf("Rel(%q): want ErrOutside, got %v", in, err)
		}
	}
	if _, err := ws.Rel("a\x00b"); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("NUL byte: got %v", err)
	}
}

func TestRootRefusesSymlinkEscapes(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ws")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"abs": filepath.Join(root, "secret"), "rel": "../secret", "sub/deep": "../../secret", "etc": "/etc",
	} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	for _, p := range []string{"abs", "rel", "sub/deep", "etc/passwd"} {
		if _, err := ws.Root().ReadFile(p); !IsOutside(err) {
			t.Errorf("ReadFile(%q): want an escape error, got %v", p, err)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{f, filepath.Join(f, "missing")} {
		if ws, err := Open(d); err == nil {
			ws.Close()
			t.Errorf("Open(%q) succeeded", d)
		}
	}
}

// TestWorkDir: a working directory resolves to its host path inside the
// workspace; escapes written or through a symlink, files and missing
// directories are refused, each with its reason.
func TestWorkDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ws")
	for _, d := range []string{filepath.Join(dir, "sub", "deep"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"out": "../elsewhere", "in": "sub/deep"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	d, err := ResolveDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{"": ".", "sub": "sub", "in": "sub/deep", filepath.Join(dir, "sub/deep"): "sub/deep"} {
		host, err := d.WorkDir(in)
		if err != nil || d.RelOf(host) != want {
			t.Errorf("WorkDir(%q) = %q (%q), %v; want %q", in, host, d.RelOf(host), err, want)
		}
	}
	for in, want := range map[string]string{
		"../elsewhere": "is outside the workspace", "out": "is outside the workspace", "/etc": "is outside the workspace",
		"file": "is not a directory", "missing": "is not a directory", "file/x": "is not a directory",
		"a\x00b": "is not a valid path",
	} {
		_, err := d.WorkDir(in)
		_, reason := DirProblem(err)
		if err == nil || !strings.HasPrefix(reason, want) {
			t.Errorf("WorkDir(%q): %v (%q), want %q", in, err, reason, want)
		}
	}
	if got := d.RelOf(filepath.Join(root, "elsewhere")); got != "." {
		t.Errorf("RelOf outside = %q, want .", got)
	}
}
