package repo

import (
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"troupe/protocol"
	"troupe/sandbox"
	"troupe/tools"
	"troupe/workspace"
)

// The tools' names, as clients see them in tools/list.
const (
	NameListDir  = "repo.listDir"
	NameReadFile = "repo.readFile"
	NameRipgrep  = "repo.ripgrep"
)

// Options configures the tools Tools builds.
type Options struct {
	// RipgrepPath is the rg binary repo.ripgrep runs: a path, or a name to
	// look up on PATH. "" means "rg". The lookup happens once, in Tools; if
	// it finds no executable, repo.ripgrep uses its built-in search.
	RipgrepPath string
	// DisableRipgrep makes repo.ripgrep use its built-in search even when
	// rg is available, for hosts where running rg is unwanted and for tests.
	DisableRipgrep bool
	// Sandbox runs rg confined to reading the workspace (a read-only
	// workspace policy). rg never runs without it: with a nil Sandbox, or
	// one that cannot enforce that policy here, repo.ripgrep uses its
	// built-in search, which cannot be led out of the workspace either.
	Sandbox *sandbox.Sandbox
	// Logger receives the one warning that rg cannot be confined; nil
	// discards it.
	Logger *slog.Logger
}

// Tools returns repo.listDir, repo.readFile and repo.ripgrep, confined to
// ws. The tools hold ws but do not own it: closing it is the caller's job,
// after the last call has returned.
func Tools(ws *workspace.Root, opts Options) []tools.Tool {
	builtin := &builtinSearch{ws: ws}
	var search searcher = builtin
	if !opts.DisableRipgrep && opts.Sandbox != nil {
		name := opts.RipgrepPath
		if name == "" {
			name = "rg"
		}
		if bin, err := exec.LookPath(name); err == nil {
			log := opts.Logger
			if log == nil {
				log = slog.New(slog.DiscardHandler)
			}
			if abs, err := filepath.Abs(bin); err == nil {
				bin = abs // the sandbox resolves rg's runtime files from it
			}
			search = &rgSearch{ws: ws, bin: bin, sb: opts.Sandbox, log: log, fallback: builtin}
		}
	}
	return []tools.Tool{
		&listDirTool{ws: ws},
		&readFileTool{ws: ws},
		&ripgrepTool{search: search},
	}
}

// readOnly is the annotation every repo tool carries: clients such as
// Codex may run such tools without asking a person first.
func readOnly(title string) *protocol.ToolAnnotations {
	yes, no := true, false
	return &protocol.ToolAnnotations{
		Title:           title,
		ReadOnlyHint:    &yes,
		DestructiveHint: &no,
		IdempotentHint:  &yes,
		OpenWorldHint:   &no,
	}
}

// pathLimit describes the optional integer limit a path tool takes
// (repo.listDir's maxEntries, repo.readFile's maxBytes).
type pathLimit struct {
	name        string
	def, lo, hi int
}

// pathCall is a decoded call of a tool that takes a path and one limit.
type pathCall struct {
	arg   string // the path as the client wrote it: the only form errors quote
	rel   string // the path relative to the workspace root
	limit int
}

// decodePathCall decodes and checks the arguments of a path tool: args
// points at the tool's argument struct, whose Path and limit fields are
// passed as path and limit.
func decodePathCall(ws *workspace.Root, tool string, raw json.RawMessage, args any,
	path **string, limit **float64, l pathLimit) (pathCall, error) {
	if err := tools.DecodeArgs(tool, raw, args); err != nil {
		return pathCall{}, err
	}
	if *path == nil {
		return pathCall{}, tools.Errorf(tools.KindInvalidArgument, "path is required (use \".\" for the workspace root)")
	}
	n, err := tools.IntArg(l.name, *limit, l.def, l.lo, l.hi)
	if err != nil {
		return pathCall{}, err
	}
	rel, err := resolve(ws, **path)
	if err != nil {
		return pathCall{}, err
	}
	return pathCall{arg: **path, rel: rel, limit: n}, nil
}

// resolve turns the client's path into a workspace-relative one, or into
// the error the model should see.
func resolve(ws *workspace.Root, arg string) (string, error) {
	rel, err := ws.Rel(arg)
	if err != nil {
		return "", workspace.ToolError(workspace.Read, arg, err)
	}
	return rel, nil
}

// openRegular opens name for reading and makes sure it is a regular file.
// O_NONBLOCK keeps the open itself from waiting for a FIFO's writer; the
// type check is an fstat on the opened handle, so it describes the very
// file that will be read, not one that was there a moment earlier.
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, errNotRegular
	}
	return f, fi, nil
}

// errNotRegular is openRegular's refusal of directories, FIFOs, devices and
// sockets; the FileInfo returned with it says which.
var errNotRegular = errors.New("not a regular file")
