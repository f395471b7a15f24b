package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"troupe/tools"
	"troupe/workspace"
)

// NameWriteFile is fs.writeFile's name, as clients see it in tools/list.
const NameWriteFile = "fs.writeFile"

// Tools returns the file tools confined to ws: for now fs.writeFile. The
// tools hold ws but do not own it: closing it is the caller's job, after
// the last call has returned.
func Tools(ws *workspace.Root) []tools.Tool {
	return []tools.Tool{&writeFileTool{ws: ws}}
}

// target is a client's path, checked and split for a write.
type target struct {
	arg  string   // the path as the client wrote it: the form errors quote
	rel  string   // the clean workspace-relative slash path
	dirs []string // the directories from the root down to the file's parent
	base string   // the file's own name
}

// resolveTarget checks the client's path and splits it. It refuses what
// can never be a file to write: the root, a path ending in "/", "/." or
// "/..", and
// anything workspace.Root.Rel refuses.
func resolveTarget(ws *workspace.Root, arg string) (target, error) {
	if arg == "" {
		return target{}, tools.Errorf(tools.KindInvalidArgument, "path is empty; name the file to write, relative to the workspace root")
	}
	rel, err := ws.Rel(arg)
	if err != nil {
		return target{}, workspace.ToolError(workspace.Write, arg, err)
	}
	if rel == "." {
		return target{}, tools.Errorf(tools.KindInvalidArgument, "path %q is the workspace root, a directory; name a file inside it", arg)
	}
	// Rel cleans "dir/", "dir/." and "dir/sub/.." down to a name that may
	// be free, but the client named a directory.
	if last := arg[strings.LastIndexByte(arg, '/')+1:]; last == "" || last == "." || last == ".." {
		return target{}, tools.Errorf(tools.KindInvalidArgument, "path %q names a directory (it ends in %q); name a file", arg, "/"+last)
	}
	parts := strings.Split(rel, "/")
	return target{arg: arg, rel: rel, dirs: parts[:len(parts)-1], base: parts[len(parts)-1]}, nil
}

// openParent walks t's directories from the workspace root one component
// at a time and returns the parent directory as an os.Root of its own,
// which the caller closes. Each step lstats one name (a symlink is
// refused), makes it when it is missing and create is set, opens it, and
// checks with os.SameFile that the opened directory is the one lstat saw:
// os.Root would follow a symlink swapped in between, as long as it stayed
// inside, and this catches it. Opening directory by directory also means
// every later operation names a single component, so nothing after the
// walk resolves a path again.
func openParent(root *os.Root, t target, create bool) (*os.Root, error) {
	cur, err := root.OpenRoot(".")
	if err != nil {
		return nil, fmt.Errorf("files: opening the workspace root: %w", err)
	}
	for i, name := range t.dirs {
		sofar := strings.Join(t.dirs[:i+1], "/")
		next, err := openDir(cur, name, create)
		cur.Close()
		if err != nil {
			return nil, dirError(t, sofar, err)
		}
		cur = next
	}
	return cur, nil
}

// openDir opens the directory name (one component) in parent, refusing a
// symlink and making a missing directory when create is set.
func openDir(parent *os.Root, name string, create bool) (*os.Root, error) {
	fi, err := parent.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) && create {
		err = parent.Mkdir(name, 0o755)
		if err == nil || errors.Is(err, fs.ErrExist) { // made, or made by someone else meanwhile
			fi, err = parent.Lstat(name)
		}
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, errSymlink
	}
	if !fi.IsDir() {
		return nil, syscall.ENOTDIR
	}
	dir, err := parent.OpenRoot(name)
	if err != nil {
		return nil, err
	}
	opened, err := dir.Stat(".")
	if err != nil {
		dir.Close()
		return nil, err
	}
	if !os.SameFile(fi, opened) {
		dir.Close()
		return nil, errSymlink // replaced, most likely by a symlink, while we looked
	}
	return dir, nil
}

// errSymlink is the walk's refusal of a symlink on the way to the file.
var errSymlink = errors.New("symbolic link")

// dirError maps a failure to walk to dir (a workspace-relative prefix of
// t.rel) to the error the model sees.
func dirError(t target, dir string, err error) error {
	switch {
	case errors.Is(err, errSymlink):
		return symlinkError(t, dir)
	case errors.Is(err, fs.ErrNotExist):
		return tools.Errorf(tools.KindNotFound,
			"path %q cannot be written: directory %q does not exist; pass \"createDirs\": true to create missing directories", t.arg, dir)
	case errors.Is(err, syscall.ENOTDIR):
		return tools.Errorf(tools.KindNotFound, "path %q cannot be written: %q is not a directory", t.arg, dir)
	}
	return workspace.ToolError(workspace.Write, t.arg, err)
}

// symlinkError is the refusal of a symlink at name, t's target itself or
// one of its directories. It never says where the link points.
func symlinkError(t target, name string) error {
	if name == t.rel {
		return tools.Errorf(tools.KindPermissionDenied,
			"path %q is a symbolic link; %s never writes through symbolic links, so name the file by its real path in the workspace", t.arg, NameWriteFile)
	}
	return tools.Errorf(tools.KindPermissionDenied,
		"path %q goes through %q, a symbolic link; %s never writes through symbolic links, so name the file by its real path in the workspace", t.arg, name, NameWriteFile)
}
