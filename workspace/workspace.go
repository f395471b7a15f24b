package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Dirs is the workspace as host paths: the two spellings of its directory
// that clients may use in absolute paths. Tools that only start processes
// in the workspace (the command tools) need no more than this; tools that
// open files use Root.
type Dirs struct {
	abs  string // absolute and clean, as configured
	real string // abs with symlinks resolved
}

// ResolveDirs resolves dir, which must be a directory (a symlink to one is
// followed), to the workspace's host paths.
func ResolveDirs(dir string) (Dirs, error) {
	if dir == "" {
		return Dirs{}, errors.New("workspace: no directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Dirs{}, fmt.Errorf("workspace %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Dirs{}, fmt.Errorf("workspace %s: %w", dir, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return Dirs{}, fmt.Errorf("workspace %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return Dirs{}, fmt.Errorf("workspace %s: not a directory", dir)
	}
	return Dirs{abs: abs, real: real}, nil
}

// Dir is the workspace's absolute host path, symlinks resolved. It is for
// running processes (rg's working directory, a sandbox policy's writable
// directory), never for client-facing text.
func (d Dirs) Dir() string { return d.real }

// Root is the directory tree file tools are confined to: the directory
// opened as an os.Root, with the spellings of its path that clients may use
// in absolute paths.
type Root struct {
	Dirs
	root *os.Root
}

// Open opens dir as the workspace. dir must be a directory; a symlink to
// one is resolved, and absolute paths through either spelling are
// accepted by Rel.
func Open(dir string) (*Root, error) {
	d, err := ResolveDirs(dir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(d.real)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", dir, err)
	}
	return &Root{Dirs: d, root: root}, nil
}

// Close releases the root directory handle.
func (w *Root) Close() error { return w.root.Close() }

// Root is the opened root; every file access of a tool goes through it.
func (w *Root) Root() *os.Root { return w.root }

// Rel turns a client-supplied path into a clean, slash-separated path
// relative to the workspace ("." for the root itself). Relative paths are
// taken from the workspace; absolute paths are accepted when they lie inside
// it. It rejects lexical escapes early; symlink escapes are caught when the
// path is opened through Root.
func (d Dirs) Rel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", ErrInvalidPath
	}
	if p == "" {
		return ".", nil
	}
	if filepath.IsAbs(p) {
		clean := filepath.Clean(p)
		rel, ok := within(d.abs, clean)
		if !ok {
			rel, ok = within(d.real, clean)
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

// WorkDir resolves a working directory for a process: p, relative to the
// workspace or absolute inside it, becomes its host path with every
// symlink resolved. It is checked twice: as written (so "../x" is refused
// even when it does not exist) and resolved (so a link that leads out is
// refused too). The errors are ErrInvalidPath, ErrOutside, ErrNotDir or
// the file system's; DirProblem puts any of them in words.
func (d Dirs) WorkDir(p string) (string, error) {
	rel, err := d.Rel(p)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(d.real, filepath.FromSlash(rel)))
	if err != nil {
		return "", err
	}
	if _, ok := within(d.real, real); !ok {
		return "", ErrOutside
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", ErrNotDir
	}
	return real, nil
}

// RelOf is host, a path inside the workspace, as a slash-separated path
// relative to it ("." for the root, and for anything not inside it): what
// prompts and audit records show instead of a host path.
func (d Dirs) RelOf(host string) string {
	rel, ok := within(d.real, filepath.Clean(host))
	if !ok {
		return "."
	}
	return filepath.ToSlash(rel)
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
