package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"

	"troupe/tools"
)

// ErrOutside is returned for any path that resolves outside the workspace:
// "..", an absolute path elsewhere, or a symlink pointing out. The message
// names no host path.
var ErrOutside = errors.New("path is outside the workspace")

// ErrInvalidPath is returned for paths that are not paths at all (NUL bytes).
var ErrInvalidPath = errors.New("invalid path")

// ErrNotDir is WorkDir's refusal of a path that exists but is not a
// directory.
var ErrNotDir = errors.New("not a directory")

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

// DirProblem says in words why p cannot be a working directory, from
// WorkDir's (or Rel's) error, with the kind of tool error it is. The
// reason reads after the quoted path ("%q " + reason) and names no host
// path. Tools and session settings word their refusals with it, so a
// working directory is refused the same way wherever it is given.
func DirProblem(err error) (tools.Kind, string) {
	switch {
	case errors.Is(err, ErrInvalidPath):
		return tools.KindInvalidArgument, "is not a valid path: it contains a NUL byte"
	case IsOutside(err):
		return tools.KindPermissionDenied, "is outside the workspace; it must be a directory inside it"
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, ErrNotDir), errors.Is(err, syscall.ENOTDIR):
		return tools.KindNotFound, "is not a directory in the workspace"
	case errors.Is(err, fs.ErrPermission):
		return tools.KindPermissionDenied, "cannot be entered: permission denied"
	case errors.Is(err, syscall.ELOOP):
		return tools.KindInvalidArgument, "has too many levels of symbolic links"
	}
	return tools.KindInvalidArgument, "cannot be used as a working directory"
}

// Access is what a tool was doing with a path when it failed, so that
// ToolError's message says it in those terms.
type Access int

const (
	// Read is resolving, opening, listing, stating or reading a path (the
	// repo tools).
	Read Access = iota
	// Write is creating or replacing a file and making its directories
	// (fs.writeFile).
	Write
)

// ToolError maps a failure to resolve or use the client's path arg to the
// tool error the model sees. Messages quote only arg, the client's own
// string: err may carry host paths (os.Root names files by their full
// path) and is never shown. Failures nobody expects stay plain errors,
// which troupe logs and reports as internal.
func ToolError(access Access, arg string, err error) error {
	verb := "read"
	if access == Write {
		verb = "written"
	}
	switch {
	case errors.Is(err, ErrInvalidPath):
		return tools.Errorf(tools.KindInvalidArgument, "path %q is not a valid path: it contains a NUL byte", arg)
	case IsOutside(err):
		if access == Write {
			return tools.Errorf(tools.KindPermissionDenied, "path %q is outside the workspace; only paths inside it can be written", arg)
		}
		return tools.Errorf(tools.KindPermissionDenied, "path %q is outside the workspace; only paths inside it can be used", arg)
	case errors.Is(err, fs.ErrNotExist):
		if access == Write {
			return tools.Errorf(tools.KindNotFound, "path %q cannot be written: a directory on its way does not exist", arg)
		}
		return tools.Errorf(tools.KindNotFound, "path %q does not exist in the workspace", arg)
	case errors.Is(err, syscall.ENOTDIR):
		if access == Write {
			return tools.Errorf(tools.KindNotFound, "path %q cannot be written: one of its parents is not a directory", arg)
		}
		return tools.Errorf(tools.KindNotFound, "path %q does not exist: one of its parents is not a directory", arg)
	case errors.Is(err, fs.ErrPermission):
		return tools.Errorf(tools.KindPermissionDenied, "path %q cannot be %s: permission denied", arg, verb)
	case errors.Is(err, syscall.ELOOP):
		return tools.Errorf(tools.KindInvalidArgument, "path %q has too many levels of symbolic links", arg)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return tools.Errorf(tools.KindInvalidArgument, "path %q is too long", arg)
	}
	if access == Write {
		switch {
		case errors.Is(err, syscall.EISDIR):
			return tools.Errorf(tools.KindInvalidArgument, "path %q is a directory; name a file", arg)
		case errors.Is(err, syscall.EROFS):
			return tools.Errorf(tools.KindPermissionDenied, "path %q cannot be written: the file system is read-only", arg)
		case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
			return tools.Errorf(tools.KindUnavailable, "path %q cannot be written: no space left on the device or quota exceeded", arg)
		}
	} else if errors.Is(err, syscall.ENXIO) || errors.Is(err, syscall.EOPNOTSUPP) {
		// What opening a socket yields.
		return tools.Errorf(tools.KindInvalidArgument, "path %q is not a regular file", arg)
	}
	return fmt.Errorf("workspace: %q cannot be %s: %w", arg, verb, err)
}
