// Package workspace confines file access to one directory tree: the
// workspace a troupe server serves.
//
// Open a directory as a [Root]; every path a client names then goes through
// [Root.Rel] (a clean path relative to the workspace, or [ErrOutside]) and
// every file operation through [Root.Root], an [os.Root]:
//
//	ws, err := workspace.Open("/path/to/checkout")
//	if err != nil {
//		return err
//	}
//	defer ws.Close()
//	rel, err := ws.Rel(clientPath) // "..", absolute paths elsewhere: ErrOutside
//	if err != nil {
//		return workspace.ToolError(workspace.Read, clientPath, err)
//	}
//	data, err := ws.Root().ReadFile(rel) // symlinks leading out: refused
//
// # Why an os.Root
//
// os.Root walks each component with openat and refuses "..", absolute
// symlinks and symlinks whose target leaves the root at any depth, and it
// does so on the opened directory handle, so a symlink swapped in between a
// check and an open cannot redirect it (no TOCTOU gap). Checking a path
// string and then opening it could be raced; this cannot.
//
// # Errors the model sees
//
// [ToolError] turns a failure on a client's path (from Rel or from an
// operation on the Root) into the tools.Error a tool returns. Its messages
// quote only the path as the client wrote it: the underlying errors name
// host paths, which are never shown.
//
// # Working directories
//
// Tools that start programs need a host path, not a handle: [Dirs] (which
// a Root embeds, and [ResolveDirs] gives without opening anything) resolves
// a working directory with [Dirs.WorkDir], refusing escapes as written and
// through symlinks, and [DirProblem] words its refusals. Session settings
// and the command tools use it, so a working directory is refused the same
// way wherever it is given.
//
// This package confines the server's own file access. Programs a tool runs
// are confined by package sandbox, which is given [Root.Dir] as the
// directory they may write.
package workspace
