// Package sandbox confines what tools may touch.
//
// This file holds the filesystem half every first-party file tool uses: a
// Workspace is a directory opened as an os.Root, and every path a client
// names is resolved inside it. os.Root walks each component with openat and
// refuses "..", absolute symlinks and symlinks whose target leaves the root at
// any depth, and it does so on the opened directory handle, so a symlink
// swapped in between a check and an open cannot redirect it (no TOCTOU gap).
// Process sandboxing (Landlock, seccomp, namespaces) lives beside it.
package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutside is returned for any path that resolves outside the workspace:
// "..", an absolute path elsewhere, or a symlink pointing out. The message
// names no host path.
var ErrOutside = errors.New("path is outside the workspace")

// ErrInvalidPath is returned for paths that are not paths at all (NUL bytes).
var ErrInvalidPath = errors.New("invalid path")

// Workspace is the directory tree file tools are confined to.
type Workspace struct {
	root *os.Root
	dir  string // absolute and clean, as configured
	real string // dir with symlinks resolved
}

// OpenWorkspace opens dir as the workspace root.
func OpenWorkspace(dir string) (*Workspace, error) {
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
	return &Workspace{root: root, dir: abs, real: real}, nil
}

// Close releases the root directory handle.
func (w *Workspace) Close() error { return w.root.Close() }

// Dir is the workspace's absolute host path, symlinks resolved. It is for
// running processes (rg's working directory), never for client-facing text.
func (w *Workspace) Dir() string { return w.real }

// Root is the opened root; every file access of a tool goes through it.
func (w *Workspace) Root() *os.Root { return w.root }

// Rel turns a client-supplied path into a clean, slash-separated path
// relative to the workspace ("." for the root itself). Relative paths are
// taken from the workspace; absolute paths are accepted when they lie inside
// it. It rejects lexical escapes early; symlink escapes are caught when the
// path is opened through Root.
func (w *Workspace) Rel(p string) (string, error) {
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

// IsOutside reports whether err (from Rel or from an operation on Root)
// means the path leaves the workspace.
func IsOutside(err error) bool {
	if errors.Is(err, ErrOutside) {
		return true
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		// os.Root's sentinel is unexported; its text is stable API surface
		// in practice ("path escapes from parent").
		return strings.Contains(pe.Err.Error(), "path escapes from parent")
	}
	return false
}
