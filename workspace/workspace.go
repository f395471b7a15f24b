package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Root is the directory tree file tools are confined to: the directory
// opened as an os.Root, with the spellings of its path that clients may use
// in absolute paths.
type Root struct {
	root *os.Root
	dir  string // absolute and clean, as configured
	real string // dir with symlinks resolved
}

// Open opens dir as the workspace. dir must be a directory; a symlink to
// one is resolved, and absolute paths through either spelling are
// accepted by Rel.
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %s: not a directory", dir)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &Root{root: root, dir: abs, real: real}, nil
}

// Close releases the root directory handle.
func (w *Root) Close() error { return w.root.Close() }

// Dir is the workspace's absolute host path, symlinks resolved. It is for
// running processes (rg's working directory, a sandbox policy's writable
// directory), never for client-facing text.
func (w *Root) Dir() string { return w.real }

// Root is the opened root; every file access of a tool goes through it.
func (w *Root) Root() *os.Root { return w.root }

// Rel turns a client-supplied path into a clean, slash-separated path
// relative to the workspace ("." for the root itself). Relative paths are
// taken from the workspace; absolute paths are accepted when they lie inside
// it. It rejects lexical escapes early; symlink escapes are caught when the
// path is opened through Root.
func (w *Root) Rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", ErrInvalidPath
	}
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		clean := filepath.Clean(p)
		rel, ok := within(w.dir, clean)
		if !ok {
			rel, ok = within(w.real, clean)
		}
		if !ok {
			return "", ErrOutside
		}
		p = rel
	}
	clean := filepath.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", ErrOutside
	}
	return filepath.ToSlash(clean), nil
}

// within reports whether target is base or below it, and the relative path.
func within(base, target string) (string, bool) {
	if target == base {
		return ".", true
	}
	prefix := base
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	if !strings.HasPrefix(target, prefix) {
		return "", false
	}
	return target[len(prefix):], true
}
